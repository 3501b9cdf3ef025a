// Validates rendered chart objects with kubernetes-models: the custom resources
// (monitoring.coreos.com/v1, e.g. ServiceMonitor), which kubernetes-validate cannot check, and,
// as a second opinion, the core objects.
//
//   node scripts/validate-crds.mjs [--require KIND]... FILE...
//
// NEARDUP_TOOLS_DIR names the directory holding node_modules (scripts/install-helm-tools.sh).
// Exits 1 when an object is invalid, when its kind has no model, or when a --require'd kind is
// missing; prints one line per object.
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { homedir } from "node:os";
import { pathToFileURL } from "node:url";

const tools =
  process.env.NEARDUP_TOOLS_DIR ||
  join(process.env.XDG_CACHE_HOME || join(homedir(), ".cache"), "neardup-tools");
const modules = join(tools, "node_modules");

async function load(rel) {
  return import(pathToFileURL(join(modules, rel)).href);
}

const { loadAll } = (await load("js-yaml/dist/js-yaml.mjs"));

// apiVersion -> directory of the model classes.
function modelPath(apiVersion, kind) {
  if (!/^[A-Za-z0-9]+$/.test(kind)) return null;
  if (apiVersion.startsWith("monitoring.coreos.com/")) {
    return `@kubernetes-models/prometheus-operator/${apiVersion}/${kind}.js`;
  }
  if (/^v[0-9]+$/.test(apiVersion)) return `kubernetes-models/${apiVersion}/${kind}.js`;
  if (/^[a-z0-9.-]+\/v[0-9a-z]+$/.test(apiVersion)) return `kubernetes-models/${apiVersion}/${kind}.js`;
  return null;
}

const args = process.argv.slice(2);
const required = [];
const files = [];
for (let i = 0; i < args.length; i++) {
  if (args[i] === "--require") required.push(args[++i]);
  else files.push(args[i]);
}
if (files.length === 0) {
  console.error("usage: validate-crds.mjs [--require KIND]... FILE...");
  process.exit(2);
}

let failed = 0;
const seen = new Map();
for (const file of files) {
  const docs = loadAll(readFileSync(file, "utf8")).filter((d) => d !== null && d !== undefined);
  for (const doc of docs) {
    const id = `${doc.kind}/${doc.metadata?.name ?? "?"}`;
    const rel = modelPath(String(doc.apiVersion ?? ""), String(doc.kind ?? ""));
    let Model;
    try {
      Model = rel && (await load(rel))[doc.kind];
    } catch {
      Model = undefined;
    }
    if (!Model) {
      console.log(`FAIL ${file}: ${id}: no model for ${doc.apiVersion} ${doc.kind}`);
      failed++;
      continue;
    }
    try {
      new Model(doc).validate();
      console.log(`ok   ${file}: ${doc.apiVersion} ${id}`);
      seen.set(doc.kind, (seen.get(doc.kind) ?? 0) + 1);
    } catch (e) {
      console.log(`FAIL ${file}: ${id}: ${e.message}`);
      failed++;
    }
  }
}
for (const kind of required) {
  if (!seen.has(kind)) {
    console.log(`FAIL no valid ${kind} in ${files.join(" ")}`);
    failed++;
  }
}
process.exit(failed ? 1 : 0);
