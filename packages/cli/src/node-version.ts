/**
 * The oldest Node.js the packages run on, as their package.json's `engines` says, and the one line
 * the CLI stops with on an older one: npm only warns (EBADENGINE) and installs anyway.
 * @module
 */

/** A version `major.minor.patch` as three numbers; undefined for anything else. */
function parse(version: string): [number, number, number] | undefined {
  const m = /^v?(\d+)\.(\d+)\.(\d+)/.exec(version.trim());
  return m ? [Number(m[1]), Number(m[2]), Number(m[3])] : undefined;
}

/**
 * The message to stop with when Node.js `version` is older than the floor of the `engines.node`
 * range (`>=22.12.0`, the form the packages use); undefined when it is new enough. A range of any
 * other form is a packaging mistake: a TypeError names it.
 */
export function nodeTooOld(version: string, range: string): string | undefined {
  const floor = /^>=\s*(\S+)$/.exec(range.trim())?.[1];
  const wanted = floor === undefined ? undefined : parse(floor);
  if (!wanted) throw new TypeError(`engines.node must be '>=MAJOR.MINOR.PATCH', got '${range}'`);
  const have = parse(version);
  if (!have) throw new TypeError(`not a Node.js version: '${version}'`);
  for (let i = 0; i < 3; i++) {
    if (have[i]! > wanted[i]!) return undefined;
    if (have[i]! < wanted[i]!) {
      return `gpumem needs Node.js ${wanted.join('.')} or later (this is ${have.join('.')}); install a newer Node.js, e.g. the current LTS`;
    }
  }
  return undefined;
}
