# The AWS side of a nodewright (or Karpenter) cluster, the same resources
# `nodewright install aws` creates: the node role and instance profile, the controller role
# (IRSA or EKS Pod Identity) with the policies of docs/IAM.md (deploy/controller-policy.json,
# one inline policy per group),
# the interruption queue with its policy, the EventBridge rules that feed it, and the node
# role's EKS access entry. The cluster's IAM OIDC provider is expected to exist (the EKS
# module and eksctl make it).

data "aws_eks_cluster" "this" {
  name = var.cluster_name
}

locals {
  # arn:PARTITION:eks:REGION:ACCOUNT:cluster/NAME
  arn_parts  = split(":", data.aws_eks_cluster.this.arn)
  partition  = local.arn_parts[1]
  region     = local.arn_parts[3]
  account_id = local.arn_parts[4]
  oidc_host  = trimprefix(data.aws_eks_cluster.this.identity[0].oidc[0].issuer, "https://")

  node_policies = [
    "AmazonEKSWorkerNodePolicy",
    "AmazonEKS_CNI_Policy",
    "AmazonEC2ContainerRegistryPullOnly",
    "AmazonSSMManagedInstanceCore",
  ]

  controller_policies = jsondecode(templatefile("${path.module}/../controller-policy.json", {
    Partition   = local.partition
    Region      = local.region
    AccountId   = local.account_id
    ClusterName = var.cluster_name
    NodeRole    = aws_iam_role.node.name
    QueueName   = aws_sqs_queue.interruption.name
  }))

  # The events the controller handles: rule suffix => (source, detail-type).
  interruption_rules = {
    ScheduledChange                 = ["aws.health", "AWS Health Event"]
    SpotInterruption                = ["aws.ec2", "EC2 Spot Instance Interruption Warning"]
    Rebalance                       = ["aws.ec2", "EC2 Instance Rebalance Recommendation"]
    InstanceStateChange             = ["aws.ec2", "EC2 Instance State-change Notification"]
    CapacityReservationInterruption = ["aws.ec2", "EC2 Capacity Reservation Instance Interruption Warning"]
  }

  irsa_trust = {
    Version = "2012-10-17"
    Statement = [{
      Effect    = "Allow"
      Principal = { Federated = "arn:${local.partition}:iam::${local.account_id}:oidc-provider/${local.oidc_host}" }
      Action    = "sts:AssumeRoleWithWebIdentity"
      Condition = {
        StringEquals = {
          "${local.oidc_host}:aud" = "sts.amazonaws.com"
          "${local.oidc_host}:sub" = "system:serviceaccount:${var.service_account_namespace}:${var.service_account_name}"
        }
      }
    }]
  }
  pod_identity_trust = {
    Version = "2012-10-17"
    Statement = [{
      Effect    = "Allow"
      Principal = { Service = "pods.eks.amazonaws.com" }
      Action    = ["sts:AssumeRole", "sts:TagSession"]
    }]
  }
}

resource "aws_iam_role" "node" {
  name = "KarpenterNodeRole-${var.cluster_name}"
  assume_role_policy = jsonencode({
    Version = "2012-10-17"
    Statement = [{
      Effect    = "Allow"
      Principal = { Service = "ec2.amazonaws.com" }
      Action    = "sts:AssumeRole"
    }]
  })
  tags = var.tags
}

resource "aws_iam_role_policy_attachment" "node" {
  for_each   = toset(local.node_policies)
  role       = aws_iam_role.node.name
  policy_arn = "arn:${local.partition}:iam::aws:policy/${each.value}"
}

resource "aws_iam_instance_profile" "node" {
  name = "KarpenterNodeInstanceProfile-${var.cluster_name}"
  role = aws_iam_role.node.name
  tags = var.tags
}

resource "aws_iam_role" "controller" {
  name               = "KarpenterControllerRole-${var.cluster_name}"
  assume_role_policy = jsonencode(var.controller_identity == "irsa" ? local.irsa_trust : local.pod_identity_trust)
  tags               = var.tags
}

resource "aws_iam_role_policy" "controller" {
  for_each = local.controller_policies
  name     = "KarpenterController${each.key}Policy"
  role     = aws_iam_role.controller.name
  policy   = jsonencode({ Version = "2012-10-17", Statement = each.value })
}

resource "aws_sqs_queue" "interruption" {
  name                      = var.cluster_name
  message_retention_seconds = 300
  sqs_managed_sse_enabled   = true
  tags                      = var.tags
}

resource "aws_sqs_queue_policy" "interruption" {
  queue_url = aws_sqs_queue.interruption.url
  policy = jsonencode({
    Version = "2012-10-17"
    Id      = "EC2InterruptionPolicy"
    Statement = [
      {
        Effect    = "Allow"
        Principal = { Service = ["events.amazonaws.com", "sqs.amazonaws.com"] }
        Action    = "sqs:SendMessage"
        Resource  = aws_sqs_queue.interruption.arn
      },
      {
        Sid       = "DenyHTTP"
        Effect    = "Deny"
        Principal = "*"
        Action    = "sqs:*"
        Resource  = aws_sqs_queue.interruption.arn
        Condition = { Bool = { "aws:SecureTransport" = false } }
      },
    ]
  })
}

resource "aws_cloudwatch_event_rule" "interruption" {
  for_each      = local.interruption_rules
  name          = "${var.cluster_name}-${each.key}"
  description   = "${each.value[1]} to the interruption queue ${var.cluster_name}"
  event_pattern = jsonencode({ source = [each.value[0]], "detail-type" = [each.value[1]] })
  tags          = var.tags
}

resource "aws_cloudwatch_event_target" "interruption" {
  for_each  = aws_cloudwatch_event_rule.interruption
  rule      = each.value.name
  target_id = "nodewright-interruption-queue"
  arn       = aws_sqs_queue.interruption.arn
}

resource "aws_eks_access_entry" "node" {
  count         = var.node_access == "access-entry" ? 1 : 0
  cluster_name  = var.cluster_name
  principal_arn = aws_iam_role.node.arn
  type          = "EC2_LINUX"
  tags          = var.tags
}

resource "aws_eks_pod_identity_association" "controller" {
  count           = var.controller_identity == "pod-identity" ? 1 : 0
  cluster_name    = var.cluster_name
  namespace       = var.service_account_namespace
  service_account = var.service_account_name
  role_arn        = aws_iam_role.controller.arn
  tags            = var.tags
}

resource "aws_iam_service_linked_role" "spot" {
  count            = var.create_spot_service_linked_role ? 1 : 0
  aws_service_name = "spot.amazonaws.com"
}
