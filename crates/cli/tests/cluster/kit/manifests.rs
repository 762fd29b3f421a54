//! Objects the tests apply, as a user would write them.

/// The EC2NodeClass `default` that the tests' NodePools name. The simulated cloud resolves
/// any selector, so one class serves every test on it.
pub const NODE_CLASS: &str = r#"apiVersion: karpenter.k8s.aws/v1
kind: EC2NodeClass
metadata: {name: default}
spec:
  amiFamily: AL2023
  role: KarpenterNodeRole-e2e
  amiSelectorTerms: [{alias: al2023@latest}]
  subnetSelectorTerms: [{tags: {karpenter.sh/discovery: e2e}}]
  securityGroupSelectorTerms: [{tags: {karpenter.sh/discovery: e2e}}]
"#;

/// A Deployment of `replicas` pause pods of one CPU each.
pub fn inflate(replicas: u32) -> String {
    format!(
        r#"apiVersion: apps/v1
kind: Deployment
metadata: {{name: inflate, namespace: default}}
spec:
  replicas: {replicas}
  selector: {{matchLabels: {{app: inflate}}}}
  template:
    metadata: {{labels: {{app: inflate}}}}
    spec:
      terminationGracePeriodSeconds: 0
      containers:
        - name: inflate
          image: public.ecr.aws/eks-distro/kubernetes/pause:3.7
          resources: {{requests: {{cpu: "1"}}}}
"#
    )
}
