"""The AWS side of an EKS cluster, in moto, for the end-to-end suite: a VPC with one subnet per
zone and the security group instances get, each tagged karpenter.sh/discovery=<cluster>; the
node role; an image; the EKS cluster (its service CIDR is what AL2023 nodes need); the
interruption queue. Prints the ids as JSON. Usage: aws_world.py ENDPOINT CLUSTER"""

import json
import sys

import boto3

endpoint, cluster = sys.argv[1], sys.argv[2]
kw = dict(
    endpoint_url=endpoint,
    region_name="us-east-1",
    aws_access_key_id="testing",
    aws_secret_access_key="testing",
)
ec2 = boto3.client("ec2", **kw)
iam = boto3.client("iam", **kw)
eks = boto3.client("eks", **kw)
sqs = boto3.client("sqs", **kw)

discovery = [{"Key": "karpenter.sh/discovery", "Value": cluster}]
vpc = ec2.create_vpc(CidrBlock="10.0.0.0/16")["Vpc"]["VpcId"]
subnets = []
for i, zone in enumerate(["us-east-1a", "us-east-1b", "us-east-1c"]):
    subnets.append(
        ec2.create_subnet(
            VpcId=vpc,
            CidrBlock=f"10.0.{i * 16}.0/20",
            AvailabilityZone=zone,
            TagSpecifications=[{"ResourceType": "subnet", "Tags": discovery}],
        )["Subnet"]["SubnetId"]
    )
# moto gives every instance the default VPC's default group, whatever its launch template
# names (real EC2 applies the template's groups), so that group is the one the class selects;
# any other would make every instance drift at once (SecurityGroupDrift).
default_vpc = ec2.describe_vpcs(Filters=[{"Name": "is-default", "Values": ["true"]}])["Vpcs"][0]
group = ec2.describe_security_groups(
    Filters=[
        {"Name": "group-name", "Values": ["default"]},
        {"Name": "vpc-id", "Values": [default_vpc["VpcId"]]},
    ]
)["SecurityGroups"][0]["GroupId"]
ec2.create_tags(Resources=[group], Tags=discovery)
trust = {
    "Version": "2012-10-17",
    "Statement": [
        {
            "Effect": "Allow",
            "Principal": {"Service": "ec2.amazonaws.com"},
            "Action": "sts:AssumeRole",
        }
    ],
}
role = f"KarpenterNodeRole-{cluster}"
iam.create_role(RoleName=role, AssumeRolePolicyDocument=json.dumps(trust))
# An x86_64 EKS image: a copy of the one moto bundles, so its id is this cluster's own.
image = ec2.copy_image(
    SourceImageId="ami-ekslinux", SourceRegion="us-east-1", Name=f"{cluster}-al2023"
)["ImageId"]
cluster_role = iam.create_role(
    RoleName=f"{cluster}-cluster", AssumeRolePolicyDocument=json.dumps(trust)
)["Role"]["Arn"]
eks.create_cluster(
    name=cluster,
    roleArn=cluster_role,
    resourcesVpcConfig={"subnetIds": subnets, "securityGroupIds": [group]},
    kubernetesNetworkConfig={"serviceIpv4Cidr": "10.100.0.0/16"},
)
queue = sqs.create_queue(QueueName=f"{cluster}-interruption")["QueueUrl"]
print(
    json.dumps(
        {
            "vpc": vpc,
            "subnets": ",".join(subnets),
            "securityGroup": group,
            "role": role,
            "image": image,
            "queue": f"{cluster}-interruption",
            "queueUrl": queue,
        }
    )
)
