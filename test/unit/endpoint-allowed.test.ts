/** The subscription endpoint allow-list (docs/notifications.md): prefixes at a path boundary. */
import { describe, expect, it } from 'vitest';
import { endpointAllowed } from '../../src/notifications/subscription-input.js';

describe('endpointAllowed', () => {
  it('matches a prefix without a trailing slash only at a path boundary', () => {
    const prefixes = ['http://h.example/hooks'];
    expect(endpointAllowed('http://h.example/hooks', prefixes)).toBe(true);
    expect(endpointAllowed('http://h.example/hooks/a', prefixes)).toBe(true);
    expect(endpointAllowed('http://h.example/hooks?x=1', prefixes)).toBe(true);
    expect(endpointAllowed('http://h.example/hooksevil', prefixes)).toBe(false);
    expect(endpointAllowed('http://h.example/hooks.evil', prefixes)).toBe(false);
  });

  it('matches a prefix with a trailing slash under it', () => {
    const prefixes = ['http://h.example/hooks/'];
    expect(endpointAllowed('http://h.example/hooks/a/b', prefixes)).toBe(true);
    expect(endpointAllowed('http://h.example/hooks', prefixes)).toBe(false);
    expect(endpointAllowed('http://h.example/hooksevil', prefixes)).toBe(false);
  });

  it('refuses encoded slashes, backslashes and dot segments, and literal traversal out of the prefix', () => {
    const prefixes = ['http://h.example/hooks'];
    for (const endpoint of [
      'http://h.example/hooks/%2e%2e%2fadmin',
      'http://h.example/hooks/%2E%2E%2Fadmin',
      'http://h.example/hooks/a%2fb',
      'http://h.example/hooks/a%5cb',
      'http://h.example/hooks/..%5cadmin',
      'http://h.example/hooks/../admin',
      'http://h.example/hooks/%2e%2e/admin',
    ])
      expect(endpointAllowed(endpoint, prefixes), endpoint).toBe(false);
    // A %2e inside a name is no dot segment.
    expect(endpointAllowed('http://h.example/hooks/v%2e1', prefixes)).toBe(true);
  });

  it('refuses another host, port or scheme, and credentials', () => {
    const prefixes = ['http://127.0.0.1:8080/hooks/'];
    expect(endpointAllowed('http://127.0.0.1:8081/hooks/', prefixes)).toBe(false);
    expect(endpointAllowed('https://127.0.0.1:8080/hooks/', prefixes)).toBe(false);
    expect(endpointAllowed('http://127.0.0.1:8080@evil.test/hooks/', prefixes)).toBe(false);
    expect(endpointAllowed('http://user:pw@127.0.0.1:8080/hooks/', prefixes)).toBe(false);
    expect(endpointAllowed('http://localhost.evil.test:8080/hooks/', prefixes)).toBe(false);
  });
});
