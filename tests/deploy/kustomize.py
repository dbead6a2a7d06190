"""A small kustomize renderer, enough for deploy/kubernetes/ (kubectl is not at hand in CI).

It understands only what our kustomizations use and refuses anything else, so
an overlay that starts using another feature fails loudly here instead of
rendering differently from `kubectl kustomize`:

- `resources`: YAML files and directories holding a kustomization.yaml;
- `namespace`: set on every namespaced object;
- `images`: `name` with `newName` and/or `newTag`;
- `replicas`: `name` and `count`;
- `patches`: `path` to a strategic-merge patch naming its target by kind and
  metadata.name. Maps merge key by key; lists of maps that all carry `name`
  (containers, env, volumes, ports) merge item by item on it, as the
  Kubernetes patch strategy does for those fields; any other list is replaced.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import yaml

Manifest = dict[str, Any]

SUPPORTED_KEYS = {"apiVersion", "kind", "resources", "namespace", "images", "replicas", "patches"}
CLUSTER_SCOPED_KINDS = {"Namespace", "ClusterRole", "ClusterRoleBinding", "PersistentVolume", "StorageClass"}
POD_TEMPLATE_KINDS = {"Deployment", "StatefulSet", "DaemonSet", "Job"}


class KustomizeError(ValueError):
    pass


def load_yaml_documents(path: Path) -> list[Manifest]:
    return [doc for doc in yaml.safe_load_all(path.read_text()) if doc is not None]


def render(directory: Path) -> list[Manifest]:
    """The manifests `kubectl kustomize directory` would produce (for our subset)."""
    kustomization_path = directory / "kustomization.yaml"
    kustomization = yaml.safe_load(kustomization_path.read_text())
    unsupported = set(kustomization) - SUPPORTED_KEYS
    if unsupported:
        raise KustomizeError(f"{kustomization_path}: unsupported keys {sorted(unsupported)}")
    manifests: list[Manifest] = []
    for resource in kustomization.get("resources", []):
        path = (directory / resource).resolve()
        manifests.extend(render(path) if path.is_dir() else load_yaml_documents(path))
    for patch_entry in kustomization.get("patches", []):
        if set(patch_entry) != {"path"}:
            raise KustomizeError(f"{kustomization_path}: only `patches: - path: FILE` is supported: {patch_entry}")
        for patch in load_yaml_documents(directory / patch_entry["path"]):
            apply_patch(manifests, patch, where=str(directory / patch_entry["path"]))
    for replica in kustomization.get("replicas", []):
        target = find(manifests, replica["name"], kinds={"Deployment", "StatefulSet"})
        target["spec"]["replicas"] = int(replica["count"])
    for image in kustomization.get("images", []):
        set_image(manifests, image)
    namespace = kustomization.get("namespace")
    if namespace:
        for manifest in manifests:
            if manifest["kind"] not in CLUSTER_SCOPED_KINDS:
                manifest.setdefault("metadata", {})["namespace"] = namespace
    return manifests


def find(manifests: list[Manifest], name: str, kinds: set[str] | None = None) -> Manifest:
    matches = [m for m in manifests if m["metadata"]["name"] == name and (kinds is None or m["kind"] in kinds)]
    if len(matches) != 1:
        raise KustomizeError(f"expected one object named {name} ({kinds or 'any kind'}), found {len(matches)}")
    return matches[0]


def apply_patch(manifests: list[Manifest], patch: Manifest, where: str) -> None:
    target = find(manifests, patch["metadata"]["name"], kinds={patch["kind"]})
    body = {key: value for key, value in patch.items() if key not in ("apiVersion", "kind")}
    merged = strategic_merge(target, body)
    target.clear()
    target.update(merged)


def strategic_merge(base: Any, patch: Any) -> Any:
    if isinstance(base, dict) and isinstance(patch, dict):
        merged = copy.deepcopy(base)
        for key, value in patch.items():
            merged[key] = strategic_merge(base[key], value) if key in base else copy.deepcopy(value)
        return merged
    if isinstance(base, list) and isinstance(patch, list) and _named(base) and _named(patch):
        merged_list = copy.deepcopy(base)
        positions = {item["name"]: i for i, item in enumerate(merged_list)}
        for item in patch:
            if item["name"] in positions:
                i = positions[item["name"]]
                merged_list[i] = strategic_merge(merged_list[i], item)
            else:
                merged_list.append(copy.deepcopy(item))
        return merged_list
    return copy.deepcopy(patch)


def _named(items: list[Any]) -> bool:
    return bool(items) and all(isinstance(item, dict) and "name" in item for item in items)


def pod_spec(manifest: Manifest) -> Manifest | None:
    """The pod spec of a workload (CronJobs included), or None."""
    if manifest["kind"] in POD_TEMPLATE_KINDS:
        return manifest["spec"]["template"]["spec"]  # type: ignore[no-any-return]
    if manifest["kind"] == "CronJob":
        return manifest["spec"]["jobTemplate"]["spec"]["template"]["spec"]  # type: ignore[no-any-return]
    return None


def set_image(manifests: list[Manifest], image: Manifest) -> None:
    name = image["name"]
    for manifest in manifests:
        spec = pod_spec(manifest)
        if spec is None:
            continue
        for container in [*spec.get("initContainers", []), *spec.get("containers", [])]:
            repository, _, tag = container["image"].partition(":")
            if repository != name:
                continue
            container["image"] = f"{image.get('newName', repository)}:{image.get('newTag', tag)}"
