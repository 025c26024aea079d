"""Security decisions, sans-I/O: who a connection is (principals, TLS names mapped by
`ssl.principal.mapping.rules`), how it proves it (SASL PLAIN and SCRAM), and what it may do (Kafka's
ACL model and the authorizer). Below the data plane, the controller and ZooKeeper code, which
call it; the sockets, ZooKeeper reads and certificates on disk stay in their callers."""
