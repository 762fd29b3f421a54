output "node_role_name" {
  description = "spec.role of the EC2NodeClasses."
  value       = aws_iam_role.node.name
}

output "controller_role_arn" {
  description = "With irsa, the chart's serviceAccount.annotations.\"eks.amazonaws.com/role-arn\"."
  value       = aws_iam_role.controller.arn
}

output "interruption_queue_name" {
  description = "The chart's settings.interruptionQueue."
  value       = aws_sqs_queue.interruption.name
}
