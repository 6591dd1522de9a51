/**
 * Byte sizes written as text (command-line options, configuration), parsed exactly as the native
 * core parses them (native/include/gpumem/sizes.hpp, also used for libgpumem_torch's environment):
 * a non-negative integer, optionally followed by KiB, MiB, GiB or TiB (powers of 1024, the unit's
 * case ignored), and nothing else. No sign, spaces, decimals, exponents or other units ('4K',
 * '4KB' and '4GB' are rejected rather than guessed at: read as powers of 1000 or of 1024, they differ
 * by 7% at GB, and the message names the binary spelling, "did you mean '4GiB'?"). At most 2^53 - 1 bytes.
 * native/tests/size_cases.json holds the cases both parsers are tested against.
 * @module
 */

/** The accepted forms, as error messages name them. */
export const sizeForms = 'a non-negative integer, optionally followed by KiB, MiB, GiB or TiB (powers of 1024)';

const shifts: Record<string, number> = { '': 1, kib: 2 ** 10, mib: 2 ** 20, gib: 2 ** 30, tib: 2 ** 40 };
const pattern = /^([0-9]+)([A-Za-z]*)$/;
const decimalLooking = /^([0-9]+)([KMGTkmgt])[Bb]?$/;

/** What the error adds for a decimal-looking unit ('4GB', '4G'): the binary spelling, where that is a valid size. */
function unitHint(text: string): string {
  const m = decimalLooking.exec(text);
  if (!m) return '';
  const binary = `${m[1]}${m[2]!.toUpperCase()}iB`;
  const unit = shifts[`${m[2]!.toLowerCase()}ib`]!;
  if (BigInt(m[1]!) * BigInt(unit) > BigInt(Number.MAX_SAFE_INTEGER)) return ''; // never suggest a refused value
  return `; did you mean '${binary}'? gpumem sizes are binary (KiB, MiB, GiB, TiB: powers of 1024) and decimal units such as GB are not accepted`;
}

/**
 * Parses a size such as `1048576`, `512MiB` or `4gib` into bytes. Throws RangeError naming `name`
 * for anything else: `Expected a size (a non-negative integer, ...) for limitBytes but received '4KB'; did you mean '4KiB'? ...`.
 */
export function parseSize(text: string, name = 'size'): number {
  const m = typeof text === 'string' ? pattern.exec(text) : null;
  const unit = m ? shifts[m[2]!.toLowerCase()] : undefined;
  const bytes = m && unit !== undefined ? Number(m[1]) * unit : NaN;
  if (!Number.isSafeInteger(bytes) || (m && BigInt(m[1]!) * BigInt(unit!) > BigInt(Number.MAX_SAFE_INTEGER))) {
    const received = typeof text === 'string' ? `'${text}'` : `${String(text)} of type ${typeof text}`;
    const hint = typeof text === 'string' ? unitHint(text) : '';
    throw new RangeError(`Expected a size (${sizeForms}) for ${name} but received ${received}${hint}`);
  }
  return bytes;
}
