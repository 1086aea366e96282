// Builds the UI into ../static (package data of `server.ui`), served at / and /ui/ by server/ui/__init__.py.
// File names carry no hash (the server sends no-cache), so a rebuild of the same sources gives the same files.
import { fileURLToPath } from 'node:url';
import { defineConfig } from 'vite';
import react from '@vitejs/plugin-react';
import { sourceHashPlugin } from './source-hash.js';

const root = fileURLToPath(new URL('.', import.meta.url));

export default defineConfig({
  root,
  base: '/ui/',
  plugins: [react(), sourceHashPlugin(root)],
  build: {
    outDir: '../static',
    emptyOutDir: true,
    sourcemap: false,
    modulePreload: { polyfill: false },
    chunkSizeWarningLimit: 1500,
    rollupOptions: {
      output: { entryFileNames: 'assets/app.js', chunkFileNames: 'assets/[name].js', assetFileNames: 'assets/[name][extname]' },
    },
  },
});
