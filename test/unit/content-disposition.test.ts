/** Document names come from the portal in any script; the header must never throw. */
import { ServerResponse, IncomingMessage } from 'node:http';
import { Socket } from 'node:net';
import { describe, expect, it } from 'vitest';
import { contentDisposition } from '../../src/http/binary-route.js';

describe('contentDisposition', () => {
  it.each(['Referral Form.pdf', 'نموذج الإحالة.pdf', 'quote"back\\slash.pdf', 'line\r\nbreak.pdf'])(
    'is a legal header value for %j',
    (name) => {
      const value = contentDisposition(name);
      const res = new ServerResponse(new IncomingMessage(new Socket()));
      expect(() => res.setHeader('Content-Disposition', value)).not.toThrow();
      expect(value).toContain(`filename*=UTF-8''${encodeURIComponent(name)}`);
    },
  );
});
