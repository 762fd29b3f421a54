variable "cluster_name" {
  description = "The EKS cluster's name."
  type        = string
}

variable "controller_identity" {
  description = "How the controller's pods get the controller role: irsa or pod-identity."
  type        = string
  default     = "irsa"
  validation {
    condition     = contains(["irsa", "pod-identity"], var.controller_identity)
    error_message = "controller_identity is irsa or pod-identity."
  }
}

variable "node_access" {
  description = "access-entry makes an EKS access entry for the node role; none leaves it to the aws-auth ConfigMap."
  type        = string
  default     = "access-entry"
  validation {
    condition     = contains(["access-entry", "none"], var.node_access)
    error_message = "node_access is access-entry or none."
  }
}

variable "service_account_namespace" {
  description = "The namespace the chart is installed in."
  type        = string
  default     = "karpenter"
}

variable "service_account_name" {
  description = "The controller's service account."
  type        = string
  default     = "karpenter"
}

variable "create_spot_service_linked_role" {
  description = "Create the account's EC2 Spot service-linked role (false where it exists already)."
  type        = bool
  default     = false
}

variable "tags" {
  description = "Tags for every resource that takes them."
  type        = map(string)
  default     = {}
}
