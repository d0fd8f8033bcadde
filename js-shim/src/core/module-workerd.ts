// In workerd, the bundler (wrangler, esbuild) turns this import into a compiled
// WebAssembly.Module: Workers may not compile wasm from bytes at run time.
import coreModule from '../../core/postbox-core.wasm';

export function loadCoreModule(): WebAssembly.Module {
  return coreModule;
}
