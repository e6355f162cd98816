"""Kubernetes objects, checked by the API server's own rules before they are written: the manifests of a planned
fleet (Deployment, Service, HPA, KServe InferenceService: `manifests`), what they scale on (`autoscale`), one
replica group as they need it (`replicas`), and the names, labels, images and quantities the planner's search Job
uses too (deployment.fanout)."""
