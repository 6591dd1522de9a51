/**
 * The room a limit on the process's address space (RLIMIT_AS: `ulimit -v`, `prlimit --as`) leaves
 * a replay. A strategy over host memory replayed past that limit takes the last of the address
 * space, and then the JavaScript engine cannot grow its heap: V8 ends the process ("JavaScript heap
 * out of memory"), which no error handler can catch. So such a replay is capped below the limit,
 * with room kept for the engine. Linux only (from /proc/self); elsewhere there is no cap.
 * @module
 */
import { readFileSync } from 'node:fs';

/** What is kept free for the JavaScript engine's heap and the replay's own records. */
export const engineHeadroomBytes = 512 * 1024 * 1024;

/** The process's address-space limit, what it maps now, and what a replay may take of the rest. */
export interface AddressSpaceRoom {
  /** The soft limit (RLIMIT_AS), bytes. */
  limitBytes: number;
  /** The process's mapped address space now (VmSize), bytes. */
  mappedBytes: number;
  /** limitBytes − mappedBytes − {@link engineHeadroomBytes}, at least 0. */
  roomBytes: number;
}

/**
 * The room from the text of /proc/self/limits and /proc/self/status, or undefined when the address
 * space is unlimited or either text lacks its line.
 */
export function parseAddressSpace(limits: string, status: string): AddressSpaceRoom | undefined {
  const limit = /^Max address space\s+(\S+)/m.exec(limits)?.[1];
  const vmSize = /^VmSize:\s+(\d+)\s+kB/m.exec(status)?.[1];
  if (limit === undefined || limit === 'unlimited' || !/^\d+$/.test(limit) || vmSize === undefined) return undefined;
  const limitBytes = Number(limit);
  const mappedBytes = Number(vmSize) * 1024;
  return { limitBytes, mappedBytes, roomBytes: Math.max(0, limitBytes - mappedBytes - engineHeadroomBytes) };
}

/** This process's room now, or undefined when its address space is unlimited (or not Linux). */
export function addressSpaceRoom(): AddressSpaceRoom | undefined {
  try {
    return parseAddressSpace(readFileSync('/proc/self/limits', 'utf8'), readFileSync('/proc/self/status', 'utf8'));
  } catch {
    return undefined; // no /proc: not Linux
  }
}
