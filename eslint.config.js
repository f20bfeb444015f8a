// @ts-check
import js from '@eslint/js';
import tseslint from 'typescript-eslint';

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
  {
    // src/worker/ builds on the rest of src/, never the other way: main.ts, at the root, wires both.
    files: ['src/**/*.ts'],
    ignores: ['src/worker/**'],
    rules: {
      'no-restricted-imports': [
        'error',
        {
          patterns: [
            {
              regex: '(^|/)worker(/|$)',
              message: 'only src/worker/ imports src/worker/: wire the two in main.ts at the root',
            },
          ],
        },
      ],
    },
  },
  { files: ['eslint.config.js', '**/*.mjs'], ...tseslint.configs.disableTypeChecked },
);
