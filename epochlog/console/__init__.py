"""`epochlog console`: a web console over the admin API and the brokers' metrics (issue 22).

One process serves server-rendered pages (aiohttp, no script): the cluster overview, topics with
partitions, a topic's records, consumer groups with lag, the controller's recent events.
`views` holds what the pages show and the pure rules behind it, `pages` renders HTML, `reader`
asks the cluster (admin client, a consumer for records, metrics endpoints), `app` routes,
`metrics` picks the few broker metrics shown. `--command-config` is every command's
(`cli/common.client_config`).
"""
