// What bench/multi's scripts (run.js, largest.js) share about a configuration's devices: reading
// DEVICES from a --config, and writing it in a table.

/**
 * DEVICES of a --config: '-' (train() on one device: undefined), a number of ranks, or CUDA
 * ordinals ('0,1'). `fail` and `integer` are the script's (bench/lib/args.js).
 */
export function parseDevices(text, { fail, integer }) {
  if (text === '-') return undefined;
  if (/^\d+$/.test(text)) return integer(text, 'DEVICES', 1);
  if (/^\d+(,\d+)+$/.test(text)) return text.split(',').map(Number);
  return fail(`Expected '-', a number or CUDA ordinals for DEVICES but received '${text}'`);
}

/** A configuration's devices in a table: '1 (train)', a number of ranks, or the ordinals. */
export function devicesText(devices) {
  return devices === undefined ? '1 (train)' : Array.isArray(devices) ? devices.join(',') : String(devices);
}
