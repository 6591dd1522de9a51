/**
 * The one setting every long test takes its timeout from. A timeout says "this is hung", never
 * "this is slow" (speed belongs in bench/): each test states what it needs on an idle machine of a
 * few cores, and {@link testTime} scales that to this one, so that `npm test` on a busy 2-core box
 * fails only on a real hang. GPUMEM_TEST_TIME_SCALE sets the factor; without it the factor comes
 * from the CPU count and the load when the tests start.
 * @module
 */
import { availableParallelism, loadavg } from 'node:os';

/** The reference machine the base times are written for: this many cores, idle. */
const referenceCores = 8;
/** A factor past this would only delay the report of a hang. */
const maxAutoScale = 10;

function readScale(env: NodeJS.ProcessEnv): number {
  const raw = env.GPUMEM_TEST_TIME_SCALE;
  if (raw !== undefined && raw !== '') {
    const value = Number(raw);
    if (!Number.isFinite(value) || value <= 0)
      throw new RangeError(`GPUMEM_TEST_TIME_SCALE must be a positive number (a factor on every test timeout) but is '${raw}'`);
    return value;
  }
  const cores = Math.max(1, availableParallelism());
  // fewer cores than the reference, or more runnable processes than cores, stretch every test alike
  const byCores = referenceCores / cores;
  const byLoad = (loadavg()[0]! + 1) / cores;
  return Math.min(maxAutoScale, Math.max(1, byCores, byLoad));
}

/** How much longer than on the reference machine a test may take here. */
const timeScale = readScale(process.env);

/** `baseMs`, what a test needs on an idle reference machine (with its margin), scaled to this one. */
export function testTime(baseMs: number): number {
  return Math.round(baseMs * timeScale);
}
