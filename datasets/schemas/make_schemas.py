"""Rebuild the vendored JSON schemas of datasets/schemas/ (run by hand; see README.md here).

Kubernetes objects: a standalone schema per kind, the ``$ref``s of kubernetes-validate's
``v1.33.0-local-strict`` files resolved into ``$defs`` of the one file. Custom resources (Knative
Service, KEDA ScaledObject): the CRD's ``openAPIV3Schema`` of the served version, made strict like
kubeconform's ``-strict`` (``additionalProperties: false`` wherever properties are listed and unknown
fields are not preserved), so that a misspelt field fails the check instead of being pruned.

    python make_schemas.py KUBERNETES_VALIDATE_DIR KNATIVE_SERVICE_CRD.yaml KEDA_SCALEDOBJECT_CRD.yaml
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import yaml

HERE = Path(__file__).parent
KINDS = {
    "horizontalpodautoscaler-autoscaling-v2": "horizontalpodautoscaler-autoscaling-v2.json",
    "configmap-v1": "configmap-v1.json",
}


def standalone(folder: Path, name: str) -> dict:
    """One kind's schema with every definition it reaches copied into its own ``$defs``."""
    definitions = json.loads((folder / "_definitions.json").read_text())["$defs"]
    root = json.loads((folder / f"{name}.json").read_text())
    needed: dict[str, dict] = {}

    def walk(node):
        if isinstance(node, dict):
            ref = node.get("$ref")
            if isinstance(ref, str) and "#/$defs/" in ref:
                key = ref.split("#/$defs/")[1]
                node["$ref"] = f"#/$defs/{key}"
                if key not in needed:
                    needed[key] = definitions[key]
                    walk(needed[key])
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    walk(root)
    root["$defs"] = dict(sorted(needed.items()))
    return root


def strict(node):
    """Make a CRD schema strict like kubeconform's -strict on a CRD schema: no fields beyond those listed."""
    if isinstance(node, dict):
        if (
            "properties" in node
            and "additionalProperties" not in node
            and not node.get("x-kubernetes-preserve-unknown-fields")
        ):
            node["additionalProperties"] = False
        for value in node.values():
            strict(value)
    elif isinstance(node, list):
        for value in node:
            strict(value)
    return node


def crd_schema(path: Path, version: str) -> dict:
    """The served version's openAPIV3Schema of a CRD file, strict, as a draft-07 JSON schema."""
    docs = yaml.safe_load_all(path.read_text())
    crd = next(d for d in docs if d and d.get("kind") == "CustomResourceDefinition")
    served = next(v for v in crd["spec"]["versions"] if v["name"] == version)
    schema = strict(served["schema"]["openAPIV3Schema"])
    group, kind = crd["spec"]["group"], crd["spec"]["names"]["kind"]
    schema["properties"]["apiVersion"] = {"type": "string", "enum": [f"{group}/{version}"]}
    schema["properties"]["kind"] = {"type": "string", "enum": [kind]}
    schema["$schema"] = "http://json-schema.org/draft-07/schema#"
    return schema


def main(kubernetes_validate: str, knative_crd: str, keda_crd: str) -> None:
    """Write the four schemas next to this file."""
    folder = Path(kubernetes_validate) / "kubernetes_validate/kubernetes-json-schema"
    folder = folder / "v1.33.0-local-strict"
    for name, out in KINDS.items():
        (HERE / out).write_text(json.dumps(standalone(folder, name), indent=1) + "\n")
    out = HERE / "service-serving-knative-v1.json"
    out.write_text(json.dumps(crd_schema(Path(knative_crd), "v1"), indent=1) + "\n")
    out = HERE / "scaledobject-keda-v1alpha1.json"
    out.write_text(json.dumps(crd_schema(Path(keda_crd), "v1alpha1"), indent=1) + "\n")


if __name__ == "__main__":
    main(*sys.argv[1:4])
