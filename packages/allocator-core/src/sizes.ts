/**
 * Byte sizes written as text (command-line options, configuration), parsed exactly as the native
 * core parses them (native/include/gpumem/sizes.hpp, also used for libgpumem_torch's environment):
 * a non-negative integer, optionally followed by KiB, MiB, GiB or TiB (powers of 1024, the unit's
 * case ignored); with a unit, the number may have a decimal fraction (`16.5GiB`) and one space may
 * stand before the unit (`0.5 GiB`). A fraction is rounded down to whole bytes (`1.0001KiB` is
 * 1024 bytes), computed exactly. Nothing else: no sign, other spaces, exponents or other units ('4K',
 * '4KB' and '4GB' are rejected rather than guessed at: read as powers of 1000 or of 1024, they differ
 * by 7% at GB, and the message names the binary spelling, "did you mean '4GiB'?"). At most 2^53 - 1 bytes.
 * native/tests/size_cases.json holds the cases both parsers are tested against.
 * @module
 */

/** The accepted forms, as error messages name them. */
export const sizeForms =
  'a non-negative integer, optionally followed by KiB, MiB, GiB or TiB (powers of 1024; with a unit, a decimal fraction such as 16.5GiB, rounded down to whole bytes)';

const shifts: Record<string, number> = { '': 1, kib: 2 ** 10, mib: 2 ** 20, gib: 2 ** 30, tib: 2 ** 40 };
// digits, a fraction, one space, a unit: the fraction and the space only with a unit (checked below)
const pattern = /^([0-9]+)(?:\.([0-9]{1,64}))?( ?)([A-Za-z]*)$/; // 64 fraction digits at most, as in C++
const decimalLooking = /^([0-9]+(?:\.[0-9]+)?)( ?)([KMGTkmgt])[Bb]?$/;

/** What the error adds for a decimal-looking unit ('4GB', '4G'): the binary spelling, where that is a valid size. */
function unitHint(text: string): string {
  const m = decimalLooking.exec(text);
  if (!m) return '';
  const binary = `${m[1]}${m[2]}${m[3]!.toUpperCase()}iB`;
  if (exactBytes(binary) === undefined) return ''; // never suggest a refused value
  return `; did you mean '${binary}'? gpumem sizes are binary (KiB, MiB, GiB, TiB: powers of 1024) and decimal units such as GB are not accepted`;
}

/** The bytes `text` stands for, rounded down, or undefined where it is not one of the forms or is above 2^53 - 1. */
function exactBytes(text: string): number | undefined {
  const m = pattern.exec(text);
  if (!m) return undefined;
  const [, whole, fraction = '', space, suffix] = m;
  const unit = shifts[suffix!.toLowerCase()];
  if (unit === undefined || (unit === 1 && (fraction !== '' || space !== ''))) return undefined; // a fraction of a byte, "1 "
  // exact in BigInt: (whole.fraction * unit) rounded down
  const bytes = (BigInt(whole! + fraction) * BigInt(unit)) / 10n ** BigInt(fraction.length);
  return bytes <= BigInt(Number.MAX_SAFE_INTEGER) ? Number(bytes) : undefined;
}

/**
 * Parses a size such as `1048576`, `512MiB`, `4gib`, `16.5GiB` or `0.5 GiB` into bytes (a fraction rounded down). Throws RangeError naming `name`
 * for anything else: `Expected a size (a non-negative integer, ...) for limitBytes but received '4KB'; did you mean '4KiB'? ...`.
 */
export function parseSize(text: string, name = 'size'): number {
  const bytes = typeof text === 'string' ? exactBytes(text) : undefined;
  if (bytes === undefined) {
    const received = typeof text === 'string' ? `'${text}'` : `${String(text)} of type ${typeof text}`;
    const hint = typeof text === 'string' ? unitHint(text) : '';
    throw new RangeError(`Expected a size (${sizeForms}) for ${name} but received ${received}${hint}`);
  }
  return bytes;
}
