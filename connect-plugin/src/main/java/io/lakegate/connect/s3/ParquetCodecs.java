/*
 * Licensed under the Apache License, Version 2.0. See http://www.apache.org/licenses/LICENSE-2.0
 */
package io.lakegate.connect.s3;

import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.nio.ByteBuffer;
import java.util.zip.GZIPOutputStream;

import com.github.luben.zstd.Zstd;
import org.apache.parquet.bytes.BytesInput;
import org.apache.parquet.compression.CompressionCodecFactory;
import org.apache.parquet.hadoop.metadata.CompressionCodecName;
import org.xerial.snappy.Snappy;

/**
 * Page compressors for {@link ParquetRecordWriter} that need no Hadoop: Parquet's default
 * {@code CodecFactory} goes through Hadoop's {@code CompressionCodec} classes, which this plugin does
 * not ship. SNAPPY uses snappy-java (raw block format, as Parquet expects), GZIP uses
 * {@link GZIPOutputStream}. Write-only: the decompressors are never used by a writer.
 */
final class ParquetCodecs implements CompressionCodecFactory {

    /** parquet-hadoop's default {@code parquet.compression.codec.zstd.level}. */
    private static final int ZSTD_LEVEL = 3;

    @Override
    public BytesInputCompressor getCompressor(CompressionCodecName codec) {
        switch (codec) {
            case UNCOMPRESSED:
                return new Compressor(codec) {
                    @Override
                    byte[] compress(byte[] bytes) {
                        return bytes;
                    }
                };
            case SNAPPY:
                return new Compressor(codec) {
                    @Override
                    byte[] compress(byte[] bytes) throws IOException {
                        return Snappy.compress(bytes);
                    }
                };
            case ZSTD:
                return new Compressor(codec) {
                    @Override
                    byte[] compress(byte[] bytes) {
                        return Zstd.compress(bytes, ZSTD_LEVEL);
                    }
                };
            case GZIP:
                return new Compressor(codec) {
                    @Override
                    byte[] compress(byte[] bytes) throws IOException {
                        ByteArrayOutputStream out = new ByteArrayOutputStream(bytes.length / 2 + 64);
                        try (GZIPOutputStream gzip = new GZIPOutputStream(out)) {
                            gzip.write(bytes);
                        }
                        return out.toByteArray();
                    }
                };
            default:
                throw new UnsupportedOperationException("Parquet codec " + codec + " is not supported");
        }
    }

    @Override
    public BytesInputDecompressor getDecompressor(CompressionCodecName codec) {
        return new BytesInputDecompressor() {
            @Override
            public BytesInput decompress(BytesInput bytes, int uncompressedSize) {
                throw new UnsupportedOperationException("write-only codec factory");
            }

            @Override
            public void decompress(ByteBuffer in, int inSize, ByteBuffer out, int outSize) {
                throw new UnsupportedOperationException("write-only codec factory");
            }

            @Override
            public void release() {
            }
        };
    }

    @Override
    public void release() {
    }

    private abstract static class Compressor implements BytesInputCompressor {
        private final CompressionCodecName codec;

        Compressor(CompressionCodecName codec) {
            this.codec = codec;
        }

        abstract byte[] compress(byte[] bytes) throws IOException;

        @Override
        public BytesInput compress(BytesInput bytes) throws IOException {
            ByteArrayOutputStream raw = new ByteArrayOutputStream(Math.toIntExact(bytes.size()));
            bytes.writeAllTo(raw);
            return BytesInput.from(compress(raw.toByteArray()));
        }

        @Override
        public CompressionCodecName getCodecName() {
            return codec;
        }

        @Override
        public void release() {
        }
    }
}
