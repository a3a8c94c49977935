"""The server's calls out to agents' declared endpoints: the SSRF guard every such call goes through
(:mod:`guard`, docs/outbound.md) and the re-verification runner that uses it (:mod:`reverify_runner`).
"""
