# rcaweb production image: the web server (deploy/serve), Celery worker and beat share it.
FROM python:3.11-slim
ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 PIP_DISABLE_PIP_VERSION_CHECK=1
WORKDIR /app
COPY pyproject.toml README.md ./
COPY rcaweb ./rcaweb
COPY collectors ./collectors
COPY incidents ./incidents
COPY web ./web
COPY cause_codes ./cause_codes
# The simulator and its driver (simulator/, harness/; extra [sim]) serve the demo and tests, not production.
RUN pip install --no-cache-dir .
COPY . .
RUN RCAWEB_SECRET_KEY=build-only python manage.py collectstatic --noinput -v0
RUN useradd --system --uid 10001 rcaweb && mkdir -p /app/var && chown rcaweb /app/var
USER rcaweb
EXPOSE 8000
# gunicorn's asyncio worker reads each request whole before a thread serves it: slow clients hold sockets only.
CMD ["deploy/serve"]
