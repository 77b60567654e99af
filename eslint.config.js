// Lint: typescript-eslint with type information, so that an un-awaited promise
// (a lost write) is an error rather than a review comment.
import tseslint from "typescript-eslint";

export default tseslint.config(
  { ignores: ["dist/**", "**/dist/**", "node_modules/**", ".wrangler/**", "coverage/**", ".scratch/**"] },
  ...tseslint.configs.recommendedTypeChecked,
  {
    languageOptions: {
      parserOptions: { projectService: true, tsconfigRootDir: import.meta.dirname },
    },
    rules: {
      "@typescript-eslint/no-floating-promises": "error",
      "@typescript-eslint/no-misused-promises": "error",
      "@typescript-eslint/consistent-type-imports": "error",
      "@typescript-eslint/no-unused-vars": ["error", { argsIgnorePattern: "^_", varsIgnorePattern: "^_" }],
      "@typescript-eslint/require-await": "off",
    },
  },
  {
    files: ["**/*.js", "**/*.mjs", "**/*.d.mts"],
    ...tseslint.configs.disableTypeChecked,
  },
);
