/**
 * The child process of `gpumem compare`: receives one request, imports the strategies (the
 * built-in ones and the request's plug-ins, so they exist here too) and runs it, sending
 * progress and the result; then exits.
 * @module
 */
import { importStrategies } from './strategies.js';
import { runOne, type RunRequest } from './compare.js';
import { throttledProgress, type Progress } from '@gpumem/gnn';
import { escapeTerminalLines } from '@gpumem/allocator-core';

function send(message: unknown): Promise<void> {
  return new Promise((resolve, reject) => process.send!(message, undefined, {}, (e) => (e ? reject(e) : resolve())));
}

process.once('message', (request: RunRequest) => {
  void (async () => {
    await importStrategies(request.plugins);
    const onProgress = throttledProgress((progress: Progress) => process.send!({ type: 'progress', progress }));
    const run = runOne(request, onProgress);
    await send({ type: 'result', run });
    process.disconnect();
  })().catch((e: unknown) => {
    // the stderr of the comparison's terminal: a plug-in's or a trace's words escaped
    process.stderr.write(`${escapeTerminalLines(e instanceof Error ? (e.stack ?? e.message) : String(e))}\n`);
    process.exitCode = 1;
    process.disconnect();
  });
});
