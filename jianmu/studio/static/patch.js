// Jianmu Studio: a live page is sent what changed in its run, not the whole run again
// (jianmu/studio/patch.py writes the patches). `applyPatch` returns the new value and leaves
// the old one as it was; what did not change is shared.
"use strict";

// A key set as an own property: a run's state may hold a key "__proto__", which plain
// assignment would take as the object's prototype.
function put(object, key, value) {
  Object.defineProperty(object, key, {value, enumerable: true, writable: true,
                                      configurable: true});
}

export function applyPatch(old, patch) {
  if (Object.prototype.hasOwnProperty.call(patch, "=")) return patch["="];
  if (patch.o) {
    const out = {...old};  // copied as own properties ("__proto__" too), never set
    for (const key of patch.d || []) delete out[key];
    for (const key of Object.keys(patch.o)) {
      const before = Object.prototype.hasOwnProperty.call(out, key) ? out[key] : undefined;
      put(out, key, applyPatch(before, patch.o[key]));
    }
    return out;
  }
  const items = (old || []).slice(0, patch.n);
  for (const index of Object.keys(patch.a).map(Number).sort((x, y) => x - y)) {
    items[index] = applyPatch(index < items.length ? items[index] : undefined, patch.a[index]);
  }
  return items;
}
