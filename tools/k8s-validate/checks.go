package main

import (
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metavalidation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// checkObject runs the API server checks that decoding alone does not make.
func checkObject(obj runtime.Object) []string {
	var errs field.ErrorList
	if accessor, ok := obj.(metav1.Object); ok {
		errs = append(errs, checkMeta(accessor, field.NewPath("metadata"))...)
	}
	switch o := obj.(type) {
	case *appsv1.Deployment:
		errs = append(errs, checkWorkload(o.Spec.Selector, &o.Spec.Template, field.NewPath("spec"))...)
	case *appsv1.StatefulSet:
		errs = append(errs, checkWorkload(o.Spec.Selector, &o.Spec.Template, field.NewPath("spec"))...)
	case *appsv1.DaemonSet:
		errs = append(errs, checkWorkload(o.Spec.Selector, &o.Spec.Template, field.NewPath("spec"))...)
	case *batchv1.Job:
		errs = append(errs, checkPodSpec(&o.Spec.Template.Spec, field.NewPath("spec", "template", "spec"))...)
	case *corev1.Pod:
		errs = append(errs, checkPodSpec(&o.Spec, field.NewPath("spec"))...)
	case *corev1.Service:
		for _, msg := range validation.IsDNS1035Label(o.Name) {
			errs = append(errs, field.Invalid(field.NewPath("metadata", "name"), o.Name, msg))
		}
		for i, p := range o.Spec.Ports {
			path := field.NewPath("spec", "ports").Index(i)
			if len(o.Spec.Ports) > 1 && p.Name == "" {
				errs = append(errs, field.Required(path.Child("name"), "every port needs a name when there are several"))
			}
			errs = append(errs, checkPortName(p.Name, path.Child("name"))...)
			errs = append(errs, checkPortNumber(int(p.Port), path.Child("port"))...)
			if p.TargetPort.Type == intstr.String {
				errs = append(errs, checkPortName(p.TargetPort.StrVal, path.Child("targetPort"))...)
			}
		}
	case *networkingv1.Ingress:
		for i, rule := range o.Spec.Rules {
			if rule.HTTP == nil {
				continue
			}
			for j, p := range rule.HTTP.Paths {
				path := field.NewPath("spec", "rules").Index(i).Child("http", "paths").Index(j)
				if p.PathType == nil {
					errs = append(errs, field.Required(path.Child("pathType"), "pathType is required in networking.k8s.io/v1"))
				}
				if p.Backend.Service == nil {
					errs = append(errs, field.Required(path.Child("backend", "service"), "a service backend is expected"))
				}
			}
		}
	}
	out := make([]string, 0, len(errs))
	for _, e := range errs {
		out = append(out, e.Error())
	}
	return out
}

func checkMeta(m metav1.Object, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	if m.GetName() == "" {
		errs = append(errs, field.Required(path.Child("name"), ""))
	}
	for _, msg := range validation.IsDNS1123Subdomain(m.GetName()) {
		errs = append(errs, field.Invalid(path.Child("name"), m.GetName(), msg))
	}
	errs = append(errs, metavalidation.ValidateLabels(m.GetLabels(), path.Child("labels"))...)
	errs = append(errs, apivalidation.ValidateAnnotations(m.GetAnnotations(), path.Child("annotations"))...)
	return errs
}

func checkWorkload(selector *metav1.LabelSelector, tpl *corev1.PodTemplateSpec, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	if selector == nil {
		errs = append(errs, field.Required(path.Child("selector"), ""))
	} else if sel, err := metav1.LabelSelectorAsSelector(selector); err != nil {
		errs = append(errs, field.Invalid(path.Child("selector"), selector, err.Error()))
	} else if sel.Empty() || !sel.Matches(labels.Set(tpl.Labels)) {
		errs = append(errs, field.Invalid(path.Child("template", "metadata", "labels"), tpl.Labels,
			"`selector` does not match template `labels`"))
	}
	errs = append(errs, metavalidation.ValidateLabels(tpl.Labels, path.Child("template", "metadata", "labels"))...)
	errs = append(errs, apivalidation.ValidateAnnotations(tpl.Annotations, path.Child("template", "metadata", "annotations"))...)
	return append(errs, checkPodSpec(&tpl.Spec, path.Child("template", "spec"))...)
}

func checkPodSpec(spec *corev1.PodSpec, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	volumes := map[string]bool{}
	for i, v := range spec.Volumes {
		vp := path.Child("volumes").Index(i)
		for _, msg := range validation.IsDNS1123Label(v.Name) {
			errs = append(errs, field.Invalid(vp.Child("name"), v.Name, msg))
		}
		if volumes[v.Name] {
			errs = append(errs, field.Duplicate(vp.Child("name"), v.Name))
		}
		volumes[v.Name] = true
	}
	if len(spec.Containers) == 0 {
		errs = append(errs, field.Required(path.Child("containers"), ""))
	}
	names := map[string]bool{}
	check := func(kind string, cs []corev1.Container) {
		for i := range cs {
			c := &cs[i]
			cp := path.Child(kind).Index(i)
			for _, msg := range validation.IsDNS1123Label(c.Name) {
				errs = append(errs, field.Invalid(cp.Child("name"), c.Name, msg))
			}
			if names[c.Name] {
				errs = append(errs, field.Duplicate(cp.Child("name"), c.Name))
			}
			names[c.Name] = true
			if c.Image == "" {
				errs = append(errs, field.Required(cp.Child("image"), ""))
			}
			errs = append(errs, checkContainer(c, volumes, cp)...)
		}
	}
	check("initContainers", spec.InitContainers)
	check("containers", spec.Containers)
	return errs
}

func checkContainer(c *corev1.Container, volumes map[string]bool, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	ports := map[string]bool{}
	for i, p := range c.Ports {
		pp := path.Child("ports").Index(i)
		if p.Name != "" {
			errs = append(errs, checkPortName(p.Name, pp.Child("name"))...)
			if ports[p.Name] {
				errs = append(errs, field.Duplicate(pp.Child("name"), p.Name))
			}
			ports[p.Name] = true
		}
		errs = append(errs, checkPortNumber(int(p.ContainerPort), pp.Child("containerPort"))...)
	}
	for i, e := range c.Env {
		ep := path.Child("env").Index(i)
		for _, msg := range validation.IsEnvVarName(e.Name) {
			errs = append(errs, field.Invalid(ep.Child("name"), e.Name, msg))
		}
		if e.Value != "" && e.ValueFrom != nil {
			errs = append(errs, field.Invalid(ep, e.Name, "set value or valueFrom, not both"))
		}
		if vf := e.ValueFrom; vf != nil {
			if vf.SecretKeyRef != nil && (vf.SecretKeyRef.Name == "" || vf.SecretKeyRef.Key == "") {
				errs = append(errs, field.Required(ep.Child("valueFrom", "secretKeyRef"), "name and key"))
			}
			if vf.FieldRef != nil && vf.FieldRef.FieldPath == "" {
				errs = append(errs, field.Required(ep.Child("valueFrom", "fieldRef", "fieldPath"), ""))
			}
		}
	}
	for i, m := range c.VolumeMounts {
		if !volumes[m.Name] {
			errs = append(errs, field.NotFound(path.Child("volumeMounts").Index(i).Child("name"), m.Name))
		}
		if m.MountPath == "" {
			errs = append(errs, field.Required(path.Child("volumeMounts").Index(i).Child("mountPath"), ""))
		}
	}
	probes := map[string]*corev1.Probe{"startupProbe": c.StartupProbe, "readinessProbe": c.ReadinessProbe, "livenessProbe": c.LivenessProbe}
	for name, probe := range probes {
		if probe == nil {
			continue
		}
		pp := path.Child(name)
		handlers := 0
		if probe.HTTPGet != nil {
			handlers++
			errs = append(errs, checkProbePort(probe.HTTPGet.Port, ports, pp.Child("httpGet", "port"))...)
		}
		if probe.TCPSocket != nil {
			handlers++
			errs = append(errs, checkProbePort(probe.TCPSocket.Port, ports, pp.Child("tcpSocket", "port"))...)
		}
		if probe.Exec != nil {
			handlers++
		}
		if probe.GRPC != nil {
			handlers++
		}
		if handlers != 1 {
			errs = append(errs, field.Invalid(pp, handlers, "a probe needs exactly one handler"))
		}
		if name == "livenessProbe" || name == "startupProbe" {
			if probe.SuccessThreshold > 1 {
				errs = append(errs, field.Invalid(pp.Child("successThreshold"), probe.SuccessThreshold, "must be 1"))
			}
		}
	}
	return errs
}

func checkProbePort(port intstr.IntOrString, ports map[string]bool, path *field.Path) field.ErrorList {
	if port.Type == intstr.String {
		if !ports[port.StrVal] {
			return field.ErrorList{field.NotFound(path, port.StrVal)}
		}
		return nil
	}
	return checkPortNumber(port.IntValue(), path)
}

func checkPortName(name string, path *field.Path) field.ErrorList {
	if name == "" {
		return nil
	}
	var errs field.ErrorList
	for _, msg := range validation.IsValidPortName(name) {
		errs = append(errs, field.Invalid(path, name, msg))
	}
	return errs
}

func checkPortNumber(port int, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	for _, msg := range validation.IsValidPortNum(port) {
		errs = append(errs, field.Invalid(path, port, msg))
	}
	return errs
}
