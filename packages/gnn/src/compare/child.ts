/**
 * The child process of `gpumem compare`: receives one run request, loads the plug-ins (so
 * GPUMEM_PLUGINS strategies exist here too), runs it, sends progress and the result, and exits.
 * @module
 */
import { loadAllocatorPlugins } from '../plugins.js';
import { runOne, type RunRequest } from './compare.js';
import type { Progress } from '../train.js';

function send(message: unknown): Promise<void> {
  return new Promise((resolve, reject) => process.send!(message, undefined, {}, (e) => (e ? reject(e) : resolve())));
}

process.once('message', (request: RunRequest) => {
  void (async () => {
    await loadAllocatorPlugins();
    let last = 0;
    const onProgress = (progress: Progress) => {
      const now = performance.now();
      if (progress.step < progress.steps && now - last < 100) return;
      last = now;
      process.send!({ type: 'progress', progress });
    };
    const run = runOne(request, onProgress);
    await send({ type: 'result', run });
    process.disconnect();
  })().catch((e: unknown) => {
    process.stderr.write(`${e instanceof Error ? (e.stack ?? e.message) : String(e)}\n`);
    process.exitCode = 1;
    process.disconnect();
  });
});
