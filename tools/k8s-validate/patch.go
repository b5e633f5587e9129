package main

import (
	"fmt"
	"os"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/util/strategicpatch"
	"sigs.k8s.io/yaml"
)

// patchDeployment implements `k8s-validate patch DEPLOYMENT.yaml PATCH.yaml`: it applies a
// strategic merge patch to one Deployment the way `kubectl patch --type strategic` does (lists
// such as containers and volumes merge by name) and prints the result as YAML, so tests can check
// that the chart's sidecar patch turns a foreign Connect Deployment into a valid one.
func patchDeployment(basePath, patchPath string) error {
	base, err := readJSON(basePath)
	if err != nil {
		return err
	}
	patch, err := readJSON(patchPath)
	if err != nil {
		return err
	}
	merged, err := strategicpatch.StrategicMergePatch(base, patch, appsv1.Deployment{})
	if err != nil {
		return fmt.Errorf("strategic merge patch: %w", err)
	}
	out, err := yaml.JSONToYAML(merged)
	if err != nil {
		return err
	}
	_, err = os.Stdout.Write(out)
	return err
}

func readJSON(path string) ([]byte, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return yaml.YAMLToJSONStrict(data)
}
