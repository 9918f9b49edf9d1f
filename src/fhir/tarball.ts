/**
 * A gzipped tarball of files, the same bytes for the same files: entries in the order given, each
 * with a fixed mtime, mode and owner, and gzip's header without a time (Node's zlib writes
 * mtime 0). tar-stream writes the tar format (ustar headers), so nothing here hand-writes one.
 */
import { promisify } from 'node:util';
import { gzip } from 'node:zlib';
import { pack } from 'tar-stream';

const gzipAsync = promisify(gzip);

/** The mtime of every entry: npm's own fixed date for reproducible packs. */
const FIXED_MTIME = new Date('1985-10-26T08:15:00.000Z');

export interface TarFile {
  path: string;
  content: Buffer;
}

/** The .tgz of `files`, in that order. */
export async function deterministicTgz(files: readonly TarFile[]): Promise<Buffer> {
  const tar = pack();
  const chunks: Buffer[] = [];
  const done = new Promise<void>((resolve, reject) => {
    tar.on('data', (chunk: unknown) => {
      chunks.push(chunk as Buffer);
    });
    tar.on('end', resolve);
    tar.on('error', reject);
  });
  for (const file of files) {
    tar.entry(
      {
        name: file.path,
        size: file.content.length,
        mode: 0o644,
        mtime: FIXED_MTIME,
        uid: 0,
        gid: 0,
        uname: '',
        gname: '',
      },
      file.content,
    );
  }
  tar.finalize();
  await done;
  // On the thread pool: about 0.1 s of compression never holds the event loop at start-up.
  return gzipAsync(Buffer.concat(chunks), { level: 9 });
}
