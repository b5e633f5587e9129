/*
 * Licensed under the Apache License, Version 2.0. See http://www.apache.org/licenses/LICENSE-2.0
 */
package io.lakegate.connect.s3;

import java.nio.file.Path;

import software.amazon.awssdk.auth.credentials.AwsBasicCredentials;
import software.amazon.awssdk.auth.credentials.AwsCredentialsProvider;
import software.amazon.awssdk.auth.credentials.DefaultCredentialsProvider;
import software.amazon.awssdk.auth.credentials.StaticCredentialsProvider;
import software.amazon.awssdk.core.sync.RequestBody;
import software.amazon.awssdk.http.urlconnection.UrlConnectionHttpClient;
import software.amazon.awssdk.regions.Region;
import software.amazon.awssdk.services.s3.S3Client;
import software.amazon.awssdk.services.s3.S3ClientBuilder;
import software.amazon.awssdk.services.s3.model.PutObjectRequest;

/**
 * The task's S3 client (AWS SDK v2 with the JDK {@code HttpURLConnection} transport). Created in
 * {@link S3SinkTask#start}, used by {@link S3SinkTask#flush}, closed in {@link S3SinkTask#stop}.
 */
final class S3Storage implements AutoCloseable {

    private final S3Client client;
    private final String bucket;

    S3Storage(S3Client client, String bucket) {
        this.client = client;
        this.bucket = bucket;
    }

    /** A client for the configured bucket, region, endpoint (path-style when set) and credentials. */
    static S3Storage create(S3SinkConfig config) {
        S3ClientBuilder builder = S3Client.builder()
                .httpClientBuilder(UrlConnectionHttpClient.builder())
                .region(Region.of(config.region()))
                .credentialsProvider(credentials(config));
        if (config.endpoint() != null) {
            builder.endpointOverride(config.endpoint()).forcePathStyle(true);
        }
        return new S3Storage(builder.build(), config.bucket());
    }

    private static AwsCredentialsProvider credentials(S3SinkConfig config) {
        if (config.accessKeyId() != null) {
            return StaticCredentialsProvider.create(
                    AwsBasicCredentials.create(config.accessKeyId(), config.secretAccessKey()));
        }
        return DefaultCredentialsProvider.create();
    }

    String bucket() {
        return bucket;
    }

    /** Uploads {@code file} as {@code key} with one PutObject; throws an SdkException on failure. */
    void put(String key, Path file, String contentType) {
        PutObjectRequest request = PutObjectRequest.builder()
                .bucket(bucket)
                .key(key)
                .contentType(contentType)
                .build();
        client.putObject(request, RequestBody.fromFile(file));
    }

    @Override
    public void close() {
        client.close();
    }
}
