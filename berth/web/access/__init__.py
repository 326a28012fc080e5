"""Who calls the services and what they may do: callers identified (noauth2, a tokens file,
Keystone) and requests judged by policy rules (oslo.policy), from files an operator gives."""
