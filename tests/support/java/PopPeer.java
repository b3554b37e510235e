import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;

import org.apache.rocketmq.client.consumer.AckCallback;
import org.apache.rocketmq.client.consumer.AckResult;
import org.apache.rocketmq.client.consumer.AckStatus;
import org.apache.rocketmq.client.consumer.PopCallback;
import org.apache.rocketmq.client.consumer.PopResult;
import org.apache.rocketmq.client.impl.MQClientAPIImpl;
import org.apache.rocketmq.client.producer.DefaultMQProducer;
import org.apache.rocketmq.common.message.MessageConst;
import org.apache.rocketmq.common.message.MessageExt;
import org.apache.rocketmq.remoting.protocol.header.AckMessageRequestHeader;
import org.apache.rocketmq.remoting.protocol.header.ExtraInfoUtil;
import org.apache.rocketmq.remoting.protocol.header.PopMessageRequestHeader;

/**
 * RocketMQ's own Java client popping and acking at one broker, as its push consumer in pop mode
 * does (MQClientAPIImpl.popMessageAsync / ackMessageAsync, receipt handles from its
 * processPopResponse), to show that handles are shared with staticmq's PopConsumer.
 *
 * <p>java -cp ROCKETMQ_JARS/*:CLASSES PopPeer NAMESRV BROKER_ADDR BROKER_NAME GROUP TOPIC starts the
 * client, prints "READY" and answers commands read from stdin, one a line, until "quit" or the end
 * of its input (started once, it answers without a JVM start inside a test's invisible times):
 * <p>"pop WANT TIMEOUT_S INVISIBLE_MS" prints "MSG body handle" per popped message, then
 * "POPPED n" (n >= WANT unless TIMEOUT_S ran out);
 * <p>"ack HANDLE" (the rest of the line: a handle has spaces) prints "ACK OK" or "ACK " and the status.
 */
public final class PopPeer {
    public static void main(String[] args) throws Exception {
        String namesrv = args[0], addr = args[1], brokerName = args[2], group = args[3], topic = args[4];
        DefaultMQProducer client = new DefaultMQProducer("staticmq-pop-peer");
        client.setNamesrvAddr(namesrv);
        client.setInstanceName("staticmq-pop-peer-" + ProcessHandle.current().pid());
        client.start();
        MQClientAPIImpl api = client.getDefaultMQProducerImpl().getMqClientFactory().getMQClientAPIImpl();
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        System.out.println("READY");
        System.out.flush();
        for (String line = in.readLine(); line != null && !line.equals("quit"); line = in.readLine()) {
            if (line.startsWith("pop ")) {
                String[] words = line.split(" ");
                pop(api, addr, brokerName, group, topic, Integer.parseInt(words[1]), Long.parseLong(words[2]),
                    Long.parseLong(words[3]));
            } else if (line.startsWith("ack ")) {
                System.out.println("ACK " + ack(api, addr, brokerName, group, topic, line.substring(4)));
            } else {
                System.out.println("UNKNOWN " + line);
            }
            System.out.flush();
        }
        client.shutdown();
        System.exit(0);
    }

    private static void pop(MQClientAPIImpl api, String addr, String brokerName, String group, String topic,
                            int want, long timeoutS, long invisibleMs) throws Exception {
        long deadline = System.currentTimeMillis() + 1000L * timeoutS;
        List<MessageExt> got = new ArrayList<>();
        while (got.size() < want && System.currentTimeMillis() < deadline) {
            PopMessageRequestHeader h = new PopMessageRequestHeader();
            h.setConsumerGroup(group);
            h.setTopic(topic);
            h.setQueueId(-1);
            h.setMaxMsgNums(32);
            h.setInvisibleTime(invisibleMs);
            h.setPollTime(1000L);
            h.setBornTime(System.currentTimeMillis());
            h.setInitMode(0);
            h.setExpType("TAG");
            h.setExp("*");
            CompletableFuture<PopResult> answer = new CompletableFuture<>();
            api.popMessageAsync(brokerName, addr, h, 5000L, new PopCallback() {
                public void onSuccess(PopResult r) { answer.complete(r); }
                public void onException(Throwable e) { answer.completeExceptionally(e); }
            });
            PopResult r = answer.get(10, TimeUnit.SECONDS);
            if (r.getMsgFoundList() != null) {
                for (MessageExt m : r.getMsgFoundList()) {
                    got.add(m);
                    System.out.println("MSG " + new String(m.getBody(), StandardCharsets.UTF_8) + " "
                        + m.getProperty(MessageConst.PROPERTY_POP_CK));
                }
                System.out.flush();
            }
        }
        System.out.println("POPPED " + got.size());
    }

    private static String ack(MQClientAPIImpl api, String addr, String brokerName, String group, String topic,
                              String handle) throws Exception {
        String[] extra = ExtraInfoUtil.split(handle);
        AckMessageRequestHeader h = new AckMessageRequestHeader();
        h.setTopic(ExtraInfoUtil.getRealTopic(extra, topic, group));
        h.setQueueId(ExtraInfoUtil.getQueueId(extra));
        h.setOffset(ExtraInfoUtil.getQueueOffset(extra));
        h.setConsumerGroup(group);
        h.setExtraInfo(handle);
        h.setBrokerName(brokerName);
        CompletableFuture<AckResult> answer = new CompletableFuture<>();
        api.ackMessageAsync(addr, 5000L, new AckCallback() {
            public void onSuccess(AckResult r) { answer.complete(r); }
            public void onException(Throwable e) { answer.completeExceptionally(e); }
        }, h);
        AckStatus status = answer.get(10, TimeUnit.SECONDS).getStatus();
        return status == AckStatus.OK ? "OK" : String.valueOf(status);
    }
}
