/**
 * JSON values read from a trace, shown in messages and checked for depth without recursion: a
 * hostile header (an array nested thousands deep) must give a clear error, not a stack overflow.
 * @module
 */

/** The deepest nesting a header's `workload` may have: what gpumem writes is two or three deep. */
export const maxHeaderDepth = 32;

/** How deeply `value` nests arrays and objects (0 for a scalar), counted without recursion. */
export function nestingDepth(value: unknown): number {
  let deepest = 0;
  const stack: Array<[unknown, number]> = [[value, 0]];
  while (stack.length > 0) {
    const [v, depth] = stack.pop()!;
    if (v === null || typeof v !== 'object') continue;
    deepest = Math.max(deepest, depth + 1);
    if (deepest > maxHeaderDepth) return deepest; // deep enough to refuse: stop looking
    for (const child of Object.values(v)) stack.push([child, depth + 1]);
  }
  return deepest;
}

/** `value` as JSON for a message: at most 80 characters, and never a stack overflow on deep nesting. */
export function preview(value: unknown): string {
  if (nestingDepth(value) > maxHeaderDepth)
    return Array.isArray(value) ? 'an array nested too deeply to show' : 'an object nested too deeply to show';
  const text = JSON.stringify(value) ?? String(value);
  return text.length > 80 ? `${text.slice(0, 77)}...` : text;
}
