from e31cli.main import app

app()
