"""The jobs API (/api/v1/): jobs (`jobs`), arrays (`arrays`), their serializers and list filters."""
