package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"regexp"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// The Prometheus Operator's ServiceMonitor is a CRD, not in client-go's scheme. It is checked
// against the part of monitoring.coreos.com/v1 that charts use, with the field names and types
// of the CRD; a field outside this subset is reported as unknown (check the CRD, then add it).
var serviceMonitorGVK = schema.GroupVersionKind{Group: "monitoring.coreos.com", Version: "v1", Kind: "ServiceMonitor"}

type serviceMonitor struct {
	APIVersion string             `json:"apiVersion"`
	Kind       string             `json:"kind"`
	Metadata   metav1.ObjectMeta  `json:"metadata"`
	Spec       serviceMonitorSpec `json:"spec"`
}

type serviceMonitorSpec struct {
	JobLabel          string                `json:"jobLabel,omitempty"`
	TargetLabels      []string              `json:"targetLabels,omitempty"`
	PodTargetLabels   []string              `json:"podTargetLabels,omitempty"`
	Endpoints         []monitorEndpoint     `json:"endpoints"`
	Selector          *metav1.LabelSelector `json:"selector"`
	NamespaceSelector *struct {
		Any        bool     `json:"any,omitempty"`
		MatchNames []string `json:"matchNames,omitempty"`
	} `json:"namespaceSelector,omitempty"`
	SampleLimit *uint64 `json:"sampleLimit,omitempty"`
}

type monitorEndpoint struct {
	Port              string              `json:"port,omitempty"`
	TargetPort        *intstr.IntOrString `json:"targetPort,omitempty"`
	Path              string              `json:"path,omitempty"`
	Scheme            string              `json:"scheme,omitempty"`
	Params            map[string][]string `json:"params,omitempty"`
	Interval          string              `json:"interval,omitempty"`
	ScrapeTimeout     string              `json:"scrapeTimeout,omitempty"`
	HonorLabels       bool                `json:"honorLabels,omitempty"`
	HonorTimestamps   *bool               `json:"honorTimestamps,omitempty"`
	Relabelings       []relabelConfig     `json:"relabelings,omitempty"`
	MetricRelabelings []relabelConfig     `json:"metricRelabelings,omitempty"`
	TLSConfig         map[string]any      `json:"tlsConfig,omitempty"`
}

type relabelConfig struct {
	SourceLabels []string `json:"sourceLabels,omitempty"`
	Separator    *string  `json:"separator,omitempty"`
	TargetLabel  string   `json:"targetLabel,omitempty"`
	Regex        string   `json:"regex,omitempty"`
	Modulus      uint64   `json:"modulus,omitempty"`
	Replacement  *string  `json:"replacement,omitempty"`
	Action       string   `json:"action,omitempty"`
}

// The CRD's pattern for monitoring.coreos.com/v1 Duration.
var promDuration = regexp.MustCompile(`^(0|(([0-9]+)y)?(([0-9]+)w)?(([0-9]+)d)?(([0-9]+)h)?(([0-9]+)m)?(([0-9]+)s)?(([0-9]+)ms)?)$`)

func checkServiceMonitor(data []byte) []string {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var sm serviceMonitor
	if err := dec.Decode(&sm); err != nil {
		return []string{fmt.Sprintf("ServiceMonitor (checked against a subset of the CRD): %v", err)}
	}
	errs := checkMeta(&sm.Metadata, field.NewPath("metadata"))
	spec := field.NewPath("spec")
	if sm.Spec.Selector == nil {
		errs = append(errs, field.Required(spec.Child("selector"), ""))
	} else if _, err := metav1.LabelSelectorAsSelector(sm.Spec.Selector); err != nil {
		errs = append(errs, field.Invalid(spec.Child("selector"), sm.Spec.Selector, err.Error()))
	}
	if len(sm.Spec.Endpoints) == 0 {
		errs = append(errs, field.Required(spec.Child("endpoints"), "at least one endpoint"))
	}
	for i, e := range sm.Spec.Endpoints {
		ep := spec.Child("endpoints").Index(i)
		if e.Port == "" && e.TargetPort == nil {
			errs = append(errs, field.Required(ep.Child("port"), "port (a Service port name) or targetPort"))
		}
		errs = append(errs, checkPortName(e.Port, ep.Child("port"))...)
		for name, d := range map[string]string{"interval": e.Interval, "scrapeTimeout": e.ScrapeTimeout} {
			if d != "" && !promDuration.MatchString(d) {
				errs = append(errs, field.Invalid(ep.Child(name), d, "not a Prometheus duration such as 30s or 1m"))
			}
		}
		if e.Scheme != "" && e.Scheme != "http" && e.Scheme != "https" {
			errs = append(errs, field.NotSupported(ep.Child("scheme"), e.Scheme, []string{"http", "https"}))
		}
	}
	out := make([]string, 0, len(errs))
	for _, e := range errs {
		out = append(out, e.Error())
	}
	return out
}
