// Command-line helpers of the bench scripts: a usage error (the message and the usage on stderr,
// exit 2) and integer flags with a lower bound.

/** fail(message) and integer(text, name, min) for a script whose usage text is `usage`. */
export function cliArgs(usage) {
  function fail(message) {
    console.error(`${message}\n${usage}`);
    process.exit(2);
  }
  function integer(text, name, min) {
    const n = Number(text);
    if (!Number.isSafeInteger(n) || n < min) fail(`Expected an integer >= ${min} for ${name} but received '${text}'`);
    return n;
  }
  return { fail, integer };
}
