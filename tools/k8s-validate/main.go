// Command k8s-validate checks rendered Kubernetes manifests offline, without a cluster.
//
//	helm template charts/lakegate | k8s-validate            # or: k8s-validate FILE...
//	k8s-validate patch DEPLOYMENT.yaml PATCH.yaml           # strategic merge, result on stdout
//
// It reads a multi-document YAML stream and decodes every object with client-go's scheme in
// STRICT mode, so an unknown field, a duplicate field or a value of the wrong type is an error,
// exactly as `kubectl apply --validate=strict` would report against a real API server of the
// pinned version (k8s.io/api in go.mod). On top of decoding it runs the cheap checks the API
// server would also refuse: object names (DNS-1123), label keys and values, annotation keys,
// container and port names, env var names, volume mounts that name no volume, probes on a port
// name the container does not declare, and a workload selector that does not match its own
// pod template.
//
// Kinds outside client-go's scheme are errors, except monitoring.coreos.com/v1 ServiceMonitor,
// which is checked against the subset of its CRD that charts use (see servicemonitor.go).
// Exit status: 0 all objects valid, 1 some object invalid (each printed as Kind/name: error),
// 2 the input could not be read. Used by tests/chart; built by scripts/install-helm.
package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/yaml"
)

type header struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Metadata   struct {
		Name string `json:"name"`
	} `json:"metadata"`
}

func main() {
	if len(os.Args) > 1 && os.Args[1] == "patch" {
		if len(os.Args) != 4 {
			fmt.Fprintln(os.Stderr, "usage: k8s-validate patch DEPLOYMENT.yaml PATCH.yaml")
			os.Exit(2)
		}
		if err := patchDeployment(os.Args[2], os.Args[3]); err != nil {
			fmt.Fprintf(os.Stderr, "k8s-validate patch: %v\n", err)
			os.Exit(1)
		}
		return
	}
	inputs := os.Args[1:]
	if len(inputs) == 0 {
		inputs = []string{"-"}
	}
	decoder := serializer.NewCodecFactory(scheme.Scheme, serializer.EnableStrict).UniversalDeserializer()
	checked, failed := 0, 0
	for _, in := range inputs {
		docs, err := readDocuments(in)
		if err != nil {
			fmt.Fprintf(os.Stderr, "k8s-validate: %s: %v\n", in, err)
			os.Exit(2)
		}
		for _, doc := range docs {
			id, problems, skip := validate(decoder, doc)
			if skip {
				continue
			}
			checked++
			if len(problems) > 0 {
				failed++
				for _, p := range problems {
					fmt.Printf("INVALID %s: %s\n", id, p)
				}
			}
		}
	}
	fmt.Printf("k8s-validate: %d object(s) checked, %d invalid\n", checked, failed)
	if failed > 0 {
		os.Exit(1)
	}
}

// readDocuments splits a YAML stream ("-" is stdin) into its documents.
func readDocuments(path string) ([][]byte, error) {
	var r io.Reader = os.Stdin
	if path != "-" {
		f, err := os.Open(path)
		if err != nil {
			return nil, err
		}
		defer f.Close()
		r = f
	}
	reader := utilyaml.NewYAMLReader(bufio.NewReader(r))
	var docs [][]byte
	for {
		doc, err := reader.Read()
		if errors.Is(err, io.EOF) {
			return docs, nil
		}
		if err != nil {
			return nil, err
		}
		docs = append(docs, doc)
	}
}

// validate decodes one document; it returns "Kind/name", the problems found, and skip=true for
// a document with no object in it (comments only, as helm leaves for disabled templates).
func validate(decoder runtime.Decoder, doc []byte) (string, []string, bool) {
	data, err := yaml.YAMLToJSONStrict(doc)
	if err != nil {
		return "document", []string{fmt.Sprintf("not valid YAML: %v", err)}, false
	}
	if trimmed := bytes.TrimSpace(data); len(trimmed) == 0 || bytes.Equal(trimmed, []byte("null")) {
		return "", nil, true
	}
	var h header
	if err := json.Unmarshal(data, &h); err != nil {
		return "document", []string{fmt.Sprintf("not a Kubernetes object: %v", err)}, false
	}
	id := fmt.Sprintf("%s/%s", h.Kind, h.Metadata.Name)
	if h.APIVersion == "" || h.Kind == "" {
		return id, []string{"apiVersion and kind are required"}, false
	}
	gvk := schema.FromAPIVersionAndKind(h.APIVersion, h.Kind)
	if gvk == serviceMonitorGVK {
		return id, checkServiceMonitor(data), false
	}
	if !scheme.Scheme.Recognizes(gvk) {
		return id, []string{fmt.Sprintf("%s is not a kind of the Kubernetes API known to client-go (typo in apiVersion or kind?)", gvk)}, false
	}
	obj, _, err := decoder.Decode(data, nil, nil)
	if err != nil {
		// Strict mode reports unknown and duplicate fields as errors; wrong types fail decoding.
		return id, []string{err.Error()}, false
	}
	return id, checkObject(obj), false
}
