// Bundles src/ into dist/ with esbuild: dist/index.html, dist/assets/app.js,
// dist/assets/app.css and dist/assets/licenses.txt (the licenses of the
// bundled npm packages). Minified, no source maps: every file in dist/ is
// compiled into the sluice binary. Run through build.sh.
import * as esbuild from 'esbuild';
import { copyFileSync, existsSync, mkdirSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = dirname(fileURLToPath(import.meta.url));
const dist = join(root, 'dist');
rmSync(dist, { recursive: true, force: true });
mkdirSync(join(dist, 'assets'), { recursive: true });

const result = await esbuild.build({
  absWorkingDir: root,
  entryPoints: { app: 'src/main.jsx' },
  outdir: 'dist/assets',
  bundle: true,
  minify: true,
  format: 'iife',
  target: ['es2020', 'chrome100', 'firefox100', 'safari15'],
  jsx: 'automatic',
  jsxImportSource: 'preact',
  sourcemap: false,
  legalComments: 'none', // collected into licenses.txt below
  metafile: true,
  logLevel: 'warning',
});

copyFileSync(join(root, 'src/index.html'), join(dist, 'index.html'));

// The npm packages the bundle contains, with their license texts.
const packages = new Set();
for (const input of Object.keys(result.metafile.inputs)) {
  const m = input.match(/node_modules\/((?:@[^/]+\/)?[^/]+)\//);
  if (m) packages.add(m[1]);
}
let licenses = 'The Sluice dashboard bundles these npm packages:\n';
for (const name of [...packages].sort()) {
  const dir = join(root, 'node_modules', name);
  const pkg = JSON.parse(readFileSync(join(dir, 'package.json'), 'utf8'));
  const file = readdirSync(dir).find((f) => /^(licen[cs]e|copying)(\.|$)/i.test(f));
  licenses += `\n==== ${name} ${pkg.version} (${pkg.license}) ====\n`;
  licenses += file ? readFileSync(join(dir, file), 'utf8').trim() + '\n' : `License: ${pkg.license}\n`;
}
writeFileSync(join(dist, 'assets/licenses.txt'), licenses);

let total = 0;
const list = (dir) => {
  for (const f of readdirSync(dir)) {
    const p = join(dir, f);
    if (statSync(p).isDirectory()) list(p);
    else {
      total += statSync(p).size;
      console.log(`${p.slice(root.length + 1).padEnd(28)} ${statSync(p).size} bytes`);
    }
  }
};
list(dist);
console.log(`total${' '.repeat(24)}${total} bytes`);
if (!existsSync(join(dist, 'assets/app.js'))) process.exit(1);
