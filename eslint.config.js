// @ts-check
import js from '@eslint/js';
import tseslint from 'typescript-eslint';

/**
 * A rule refusing, in `files`, the relative imports whose path matches `^` + `pattern`.
 * @param {string} files
 * @param {string} pattern
 * @param {string} message
 */
function wall(files, pattern, message) {
  const patterns = [{ regex: `^${pattern}`, message }];
  return { files: [files], rules: { 'no-restricted-imports': ['error', { patterns }] } };
}

export default tseslint.config(
  { ignores: ['dist/**', 'node_modules/**', 'coverage/**'] },
  js.configs.recommended,
  ...tseslint.configs.recommendedTypeChecked,
  {
    languageOptions: {
      parserOptions: { projectService: true, tsconfigRootDir: import.meta.dirname },
    },
    rules: {
      '@typescript-eslint/no-floating-promises': 'error',
      // Fastify's idiom: plugins and handlers are async whether or not they await.
      '@typescript-eslint/require-await': 'off',
      '@typescript-eslint/consistent-type-imports': 'error',
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_' }],
    },
  },
  // Where the code lives (docs/design.md, "Shape"): a file's folder says which process runs it.
  // main.ts, at the root, wires the API and the worker; neither imports the other, what both use
  // (src/core/) imports neither, and the simulator (tools/) uses only src/core/.
  // test/layout.test.ts checks the folder graph the design draws.
  wall('src/api/**/*.ts', '(\\.\\./)+worker/', 'src/api/ runs only in the API: no worker/'),
  wall('worker/**/*.ts', '(\\.\\./)+src/api/', 'worker/ runs only in the worker: no src/api/'),
  wall(
    'src/core/**/*.ts',
    '(\\.\\./)+(api|worker)/',
    'src/core/ is what both processes share: no src/api/ or worker/',
  ),
  wall(
    'tools/**/*.ts',
    '(\\.\\./)+(src/(?!core/)|worker/|test/|bench/)',
    'tools/ may import only src/core/',
  ),
  { files: ['eslint.config.js', '**/*.mjs'], ...tseslint.configs.disableTypeChecked },
);
