/*
 * Licensed under the Apache License, Version 2.0. See http://www.apache.org/licenses/LICENSE-2.0
 */
package io.lakegate.connect.s3;

import java.io.IOException;
import java.nio.file.Path;
import java.util.List;

import org.apache.kafka.connect.sink.SinkRecord;

/**
 * Writes one output file from the buffered records of one topic partition. Called by
 * {@link S3SinkTask#flush} with a fresh temporary file that is uploaded and deleted afterwards.
 */
interface RecordFileWriter {

    /**
     * Writes {@code records} (non-empty, in offset order) to {@code file}, replacing its content.
     *
     * @throws IOException if the local file cannot be written
     * @throws org.apache.kafka.connect.errors.DataException if a record cannot be encoded
     */
    void write(List<SinkRecord> records, Path file) throws IOException;
}
