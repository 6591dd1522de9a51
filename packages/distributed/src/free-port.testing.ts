/**
 * For tests of the TCP rendezvous: a loopback port that nothing listens on right now.
 * @module
 */
import { createServer } from 'node:net';

/** A port on 127.0.0.1 that nothing listens on right now (the kernel's pick, released at once). */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.on('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address() as { port: number };
      server.close(() => resolve(port));
    });
  });
}
