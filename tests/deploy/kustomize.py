"""A small kustomize renderer, enough for deploy/kubernetes/ (kubectl may be missing).

It understands only what our kustomizations use and refuses anything else, so
an overlay that starts using another feature fails loudly here instead of
rendering differently from `kubectl kustomize` (tests/deploy/test_manifests.py
also compares the two when kubectl is installed):

- `resources`: YAML files and directories holding a kustomization.yaml;
- `components`: directories holding a `kind: Component` kustomization, applied
  to the resources gathered so far (after `resources`, before the including
  kustomization's own generators and patches, as kustomize does);
- `configMapGenerator`: `name` with `literals`, `envs` (KEY=VALUE lines, `#`
  comments) and `files` (`[key=]path`), `behavior` create, merge or replace.
  A generated ConfigMap's name gets kustomize's content hash suffix once the
  whole tree is rendered, and every reference to it (configMapKeyRef,
  configMapRef, configMap and projected volumes) follows, so a changed setting
  changes the pod template and rolls the pods;
- `namespace`: set on every namespaced object;
- `images`: `name` with `newName` and/or `newTag`;
- `replicas`: `name` and `count`;
- `patches`: `path` to a strategic-merge patch naming its target by kind and
  metadata.name. Maps merge key by key; lists of maps that all carry `name`
  (containers, env, volumes, ports) merge item by item on it, as the
  Kubernetes patch strategy does for those fields, items the patch adds going
  first (as kustomize orders them); any other list is replaced.
"""

from __future__ import annotations

import copy
import hashlib
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import yaml

Manifest = dict[str, Any]

SUPPORTED_KEYS = {
    "apiVersion",
    "kind",
    "resources",
    "components",
    "configMapGenerator",
    "namespace",
    "images",
    "replicas",
    "patches",
}
GENERATOR_KEYS = {"name", "behavior", "literals", "envs", "files"}
# Marks a generated ConfigMap until the tree is rendered and its hash suffix is known.
_GENERATED = "__generated__"
CLUSTER_SCOPED_KINDS = {"Namespace", "ClusterRole", "ClusterRoleBinding", "PersistentVolume", "StorageClass"}
POD_TEMPLATE_KINDS = {"Deployment", "StatefulSet", "DaemonSet", "Job"}


class KustomizeError(ValueError):
    pass


def load_yaml_documents(path: Path) -> list[Manifest]:
    return [doc for doc in yaml.safe_load_all(path.read_text()) if doc is not None]


def render(directory: Path) -> list[Manifest]:
    """The manifests `kubectl kustomize directory` would produce (for our subset)."""
    manifests = _build(directory, [], component=False)
    _name_generated_config_maps(manifests)
    return manifests


def _build(directory: Path, manifests: list[Manifest], component: bool) -> list[Manifest]:
    kustomization_path = directory / "kustomization.yaml"
    kustomization = yaml.safe_load(kustomization_path.read_text())
    unsupported = set(kustomization) - SUPPORTED_KEYS
    if unsupported:
        raise KustomizeError(f"{kustomization_path}: unsupported keys {sorted(unsupported)}")
    if (kustomization.get("kind") == "Component") != component:
        raise KustomizeError(f"{kustomization_path}: a Component only under `components`, and only a Component there")
    for resource in kustomization.get("resources", []):
        path = (directory / resource).resolve()
        manifests.extend(_build(path, [], component=False) if path.is_dir() else load_yaml_documents(path))
    for path in kustomization.get("components", []):
        _build((directory / path).resolve(), manifests, component=True)
    for generator in kustomization.get("configMapGenerator", []):
        generate_config_map(manifests, generator, directory)
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


def generate_config_map(manifests: list[Manifest], generator: Manifest, directory: Path) -> None:
    unsupported = set(generator) - GENERATOR_KEYS
    if unsupported:
        raise KustomizeError(f"{directory}: configMapGenerator keys {sorted(unsupported)} are not supported")
    data: dict[str, str] = {}
    for literal in generator.get("literals", []):
        key, value = _key_value(literal, directory)
        data[key] = _unquote(value)
    for env_file in generator.get("envs", []):
        for line in (directory / env_file).read_text().splitlines():
            line = line.strip()
            if line and not line.startswith("#"):
                key, value = _key_value(line, directory / env_file)
                data[key] = value
    for source in generator.get("files", []):
        key, _, path = source.rpartition("=")
        data[key or Path(path).name] = (directory / path).read_text()
    behavior = generator.get("behavior", "create")
    if behavior == "create":
        manifests.append(
            {
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": {"name": generator["name"]},
                "data": data,
                _GENERATED: True,
            }
        )
        return
    if behavior not in ("merge", "replace"):
        raise KustomizeError(f"{directory}: configMapGenerator behavior {behavior!r} is not supported")
    target = find(manifests, generator["name"], kinds={"ConfigMap"})
    if not target.get(_GENERATED):
        raise KustomizeError(f"{directory}: {generator['name']} was not generated, so it cannot be merged into")
    target["data"] = {**target.get("data", {}), **data} if behavior == "merge" else data


def _key_value(text: str, where: Path) -> tuple[str, str]:
    key, sep, value = text.partition("=")
    if not sep or not key.strip():
        raise KustomizeError(f"{where}: {text!r} is not KEY=VALUE")
    return key.strip(), value


def _unquote(value: str) -> str:
    if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
        return value[1:-1]
    return value


def config_map_hash(data: dict[str, str]) -> str:
    """kustomize's name suffix for a ConfigMap: sha256 over Go's JSON encoding of
    kind, (empty) name and data, its first ten hex digits with 0, 1, 3, a and e
    replaced so that the suffix never reads as a number or a word."""
    encoded = json.dumps(
        {"data": data, "kind": "ConfigMap", "name": ""}, sort_keys=True, separators=(",", ":"), ensure_ascii=False
    )
    encoded = encoded.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")
    return hashlib.sha256(encoded.encode()).hexdigest()[:10].translate(str.maketrans("013ae", "ghkmt"))


def _name_generated_config_maps(manifests: list[Manifest]) -> None:
    renamed: dict[tuple[str | None, str], str] = {}
    for manifest in manifests:
        if manifest.pop(_GENERATED, False):
            name = manifest["metadata"]["name"]
            manifest["metadata"]["name"] = f"{name}-{config_map_hash(manifest.get('data', {}))}"
            renamed[(manifest["metadata"].get("namespace"), name)] = manifest["metadata"]["name"]
    for manifest in manifests:
        spec = pod_spec(manifest)
        if spec is None:
            continue
        namespace = manifest["metadata"].get("namespace")
        for reference in _config_map_references(spec):
            reference["name"] = renamed.get((namespace, reference["name"]), reference["name"])


def _config_map_references(spec: Manifest) -> Iterator[Manifest]:
    """Every place a pod spec names a ConfigMap."""
    for container in [*spec.get("initContainers", []), *spec.get("containers", [])]:
        for entry in container.get("env", []):
            if "configMapKeyRef" in entry.get("valueFrom", {}):
                yield entry["valueFrom"]["configMapKeyRef"]
        for source in container.get("envFrom", []):
            if "configMapRef" in source:
                yield source["configMapRef"]
    for volume in spec.get("volumes", []):
        if "configMap" in volume:
            yield volume["configMap"]
        for source in volume.get("projected", {}).get("sources", []):
            if "configMap" in source:
                yield source["configMap"]


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
        added = []
        for item in patch:
            if item["name"] in positions:
                i = positions[item["name"]]
                merged_list[i] = strategic_merge(merged_list[i], item)
            else:
                added.append(copy.deepcopy(item))
        # kustomize puts the items a patch adds before the existing ones.
        return added + merged_list
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
