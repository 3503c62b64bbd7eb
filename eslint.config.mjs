// ESLint for the front end (js/; .mjs: package.json has no "type": "module"): the recommended rules with browser and worker globals.
// `npm run lint` runs it; `make lint` too.
import js from "@eslint/js";
import globals from "globals";

export default [
  { ignores: ["fxviz/static/**", "node_modules/**"] },
  js.configs.recommended,
  {
    files: ["js/**/*.js", "js/**/*.mjs", "eslint.config.mjs"],
    languageOptions: {
      ecmaVersion: 2022,
      sourceType: "module",
      globals: { ...globals.browser, ...globals.worker, ...globals.node },
    },
    rules: {
      "no-unused-vars": ["error", { argsIgnorePattern: "^_" }],
      eqeqeq: ["error", "smart"],
      "prefer-const": "error",
      "no-var": "error",
    },
  },
];
