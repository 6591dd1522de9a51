/**
 * Imported first by the CLI, so that it runs before any other module of it: on a Node.js older than
 * the package's `engines` floor, the CLI stops here with one line and exit status 1.
 * @module
 */
import { createRequire } from 'node:module';
import { nodeTooOld } from './node-version.js';

const { engines } = createRequire(import.meta.url)('../package.json') as { engines: { node: string } };
const tooOld = nodeTooOld(process.versions.node, engines.node);
if (tooOld) {
  process.stderr.write(`${tooOld}\n`);
  process.exit(1);
}
