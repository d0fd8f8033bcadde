// One error vocabulary: the README's table of codes is exactly PostboxErrorCode, the union the
// PostboxError constructor checks every literal code against. The union is read with the
// TypeScript compiler (its literal members, through every alias), not by pattern.
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { test } from 'node:test';
import ts from 'typescript';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');

function unionCodes(): string[] {
  const file = path.join(root, 'js-shim/src/errors.ts');
  const program = ts.createProgram([file], { strict: true, target: ts.ScriptTarget.ES2022, module: ts.ModuleKind.ES2022, moduleResolution: ts.ModuleResolutionKind.Bundler, noEmit: true });
  const checker = program.getTypeChecker();
  const source = program.getSourceFile(file)!;
  const alias = source.statements.find((s): s is ts.TypeAliasDeclaration => ts.isTypeAliasDeclaration(s) && s.name.text === 'PostboxErrorCode');
  assert.ok(alias, 'errors.ts declares PostboxErrorCode');
  const type = checker.getTypeAtLocation(alias.name);
  const members = type.isUnion() ? type.types : [type];
  return members.map((t) => {
    assert.ok(t.isStringLiteral(), `every member of PostboxErrorCode is a string literal (${checker.typeToString(t)})`);
    return t.value;
  }).sort();
}

function readmeCodes(): string[] {
  const readme = readFileSync(path.join(root, 'README.md'), 'utf8');
  const section = readme.slice(readme.indexOf('## Errors'), readme.indexOf('\n## ', readme.indexOf('## Errors') + 1));
  const rows = section.split('\n').filter((line) => line.startsWith('| `'));
  return rows.flatMap((row) => [...row.split('|')[1]!.matchAll(/`([a-z_]+)`/g)].map((m) => m[1]!)).sort();
}

test('the README\'s table of error codes is exactly PostboxErrorCode', () => {
  const union = unionCodes();
  const table = readmeCodes();
  assert.ok(union.length > 40 && union.includes('unsupported') && union.includes('no_matching_signature'), `the union as read: ${union.join(', ')}`);
  assert.deepEqual(table, union);
});
