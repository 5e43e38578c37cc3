"""Memory that reaches the agent without being asked: ``memtrio context``, the agent
lifecycle hooks (``memtrio hook``), the session digest and ``memtrio install``."""
