"""The gRPC front end: apache.rocketmq.v2.MessagingService over a MessageStore."""
