// Command-line helpers of the bench scripts: --help (the usage on stdout, exit 0), a usage error
// (the message and the usage on stderr, exit 2) and integer flags with a lower bound.

/**
 * help(), fail(message) and integer(text, name, min) for a script whose usage text is `usage`;
 * with `name`, fail's message starts `name: `.
 */
export function cliArgs(usage, name) {
  function help() {
    console.log(usage);
    process.exit(0);
  }
  function fail(message) {
    console.error(`${name ? `${name}: ` : ''}${message}\n${usage}`);
    process.exit(2);
  }
  function integer(text, name, min) {
    const n = Number(text);
    if (!Number.isSafeInteger(n) || n < min) fail(`Expected an integer >= ${min} for ${name} but received '${text}'`);
    return n;
  }
  return { help, fail, integer };
}
