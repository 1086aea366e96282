// CodeExec's JavaScript runner: loads the script, calls main(args) (awaiting a promise) and reports
// what it returned.
//
// `node runner.js CODE ARGUMENTS REPORT_FD`: the value goes to REPORT_FD as one JSON line
// {"result": {"present": true, "value": ...}}; a main that returns nothing reports {"present": false}
// (what the script printed is then the result). `main` may be exported, or a top-level function
// (the script is loaded with a line appended that exports it). Once main has settled, the runner exits
// (stdout and stderr, pipes, are written synchronously on Linux), whatever the script left pending.
'use strict';
const fs = require('fs');
const path = require('path');
const [codePath, argsPath, reportFd] = process.argv.slice(2);
process.argv.splice(2);
const args = JSON.parse(fs.readFileSync(argsPath, 'utf8'));

function fail(message) {
  process.stderr.write(message + '\n');
  process.exitCode = 1;
}

function finish(value) {
  const result = value === undefined ? { present: false } : { present: true, value: value };
  let line;
  try {
    line = JSON.stringify({ result: result });
  } catch (err) {
    fail('main() returned a value that cannot be written as JSON: ' + err.message);
    return;
  }
  fs.writeSync(Number(reportFd), line + '\n');
}

const loaded = require(path.resolve(codePath));
const entry = (loaded && loaded.__canvas2graphMain) || (typeof loaded === 'function' ? loaded : loaded && loaded.main);
if (typeof entry !== 'function') {
  fail('The script defines no function named main; CodeExec calls main(args) and uses its return value.');
} else {
  // once main has settled the run is over: children, timers and sockets it left do not keep it going
  Promise.resolve().then(() => entry(args))
    .then(finish, (err) => fail(err && err.stack ? String(err.stack) : String(err)))
    .then(() => process.exit());
}
